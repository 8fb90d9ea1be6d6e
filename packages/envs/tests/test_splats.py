"""The splat pipeline without a simulator: rotations, PLY files, SH colours, projection,
compositing against a per-pixel reference, scenes, and the gsplat backend on a GPU."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("plyfile")

from hypothesis import given, settings
from hypothesis import strategies as st

import vlarl_envs.splats.backends as backends
import vlarl_envs.splats.compositor as compositor
from vlarl_envs.splats.backends import TorchRasterizer, make_rasterizer
from vlarl_envs.splats.camera import PinholeCamera
from vlarl_envs.splats.gaussians import (
    Gaussians,
    covariances,
    matrix_to_quat,
    pose_matrix,
    quat_multiply,
    quat_to_matrix,
)
from vlarl_envs.splats.ply import read_ply, write_ply
from vlarl_envs.splats.projection import project
from vlarl_envs.splats.reference import composite_per_pixel
from vlarl_envs.splats.scene import RigidBody, SceneRenderer, SplatScene, render_together
from vlarl_envs.splats.sh import rgb_to_sh_dc, rotate_sh, sh_basis, sh_to_rgb, sphere_directions

finite = st.floats(-1.0, 1.0, allow_nan=False, width=32)
quaternions = st.tuples(finite, finite, finite, finite).filter(lambda q: sum(v * v for v in q) > 1e-2)


def random_gaussians(count: int, seed: int, sh_degree: int = 0, spread: float = 0.3, opacity=(0.2, 0.99)) -> Gaussians:
    generator = torch.Generator().manual_seed(seed)
    quats = torch.randn(count, 4, generator=generator)
    return Gaussians(
        means=torch.randn(count, 3, generator=generator) * spread,
        quats=quats / quats.norm(dim=1, keepdim=True),
        scales=torch.rand(count, 3, generator=generator) * 0.08 + 0.01,
        opacities=torch.rand(count, generator=generator) * (opacity[1] - opacity[0]) + opacity[0],
        sh=torch.randn(count, (sh_degree + 1) ** 2, 3, generator=generator) * 0.5,
    )


# --- rotations and covariances ---------------------------------------------------------------


@settings(deadline=None)
@given(quaternions)
def test_quaternion_matrices_are_rotations_and_invert_back(q):
    quat = torch.tensor(q, dtype=torch.float64)
    rotation = quat_to_matrix(quat)
    torch.testing.assert_close(rotation @ rotation.T, torch.eye(3, dtype=torch.float64), atol=1e-9, rtol=0)
    assert torch.linalg.det(rotation) == pytest.approx(1.0, abs=1e-9)
    recovered = matrix_to_quat(rotation)
    unit = quat / quat.norm()
    assert torch.allclose(recovered, unit, atol=1e-7) or torch.allclose(recovered, -unit, atol=1e-7)


@settings(deadline=None)
@given(quaternions, quaternions)
def test_quaternion_product_composes_rotations(first, second):
    a, b = torch.tensor(first, dtype=torch.float64), torch.tensor(second, dtype=torch.float64)
    torch.testing.assert_close(quat_to_matrix(quat_multiply(a, b)), quat_to_matrix(a) @ quat_to_matrix(b))


@settings(deadline=None)
@given(quaternions, st.tuples(*[st.floats(1e-3, 2.0)] * 3))
def test_covariance_is_symmetric_with_scales_squared_as_eigenvalues(q, scales):
    covariance = covariances(torch.tensor(q, dtype=torch.float64), torch.tensor(scales, dtype=torch.float64))
    torch.testing.assert_close(covariance, covariance.T)
    eigenvalues = torch.linalg.eigvalsh(covariance)
    torch.testing.assert_close(eigenvalues, torch.tensor(sorted(s * s for s in scales), dtype=torch.float64))


def test_transformed_gaussians_move_rigidly():
    gaussians = random_gaussians(20, seed=0)
    transform = pose_matrix(torch.tensor([0.3, -0.2, 1.0]), torch.tensor([0.8, 0.1, -0.5, 0.3]))
    moved = gaussians.transformed(transform)
    torch.testing.assert_close(moved.means, gaussians.means @ transform[:3, :3].T + transform[:3, 3])
    rotation = transform[:3, :3]
    expected = rotation @ covariances(gaussians.quats, gaussians.scales) @ rotation.T
    torch.testing.assert_close(covariances(moved.quats, moved.scales), expected, atol=1e-6, rtol=1e-5)


def test_decimated_gaussians_still_cover_a_surface():
    """A plane of flat discs keeps its coverage when 3 in 4 are dropped and the rest widened."""
    side = torch.linspace(-0.5, 0.5, 60)
    grid = torch.stack(torch.meshgrid(side, side, indexing="ij"), dim=-1).reshape(-1, 2)
    count = len(grid)
    plane = Gaussians(
        means=torch.cat([grid, torch.zeros(count, 1)], dim=1),
        quats=torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(count, 1),
        scales=torch.tensor([[0.01, 0.01, 0.001]]).repeat(count, 1),
        opacities=torch.full((count,), 0.9),
        sh=torch.zeros(count, 1, 3),
    )
    coarse = plane.decimated(4)
    assert len(coarse) == count // 4
    torch.testing.assert_close(coarse.scales[0], torch.tensor([0.02, 0.02, 0.001]))
    cam = PinholeCamera.look_at((0.0, 0.0, 2.0), (0.0, 0.0, 0.0), 40, 40, 0.4, up=(0.0, 1.0, 0.0))

    def coverage(gaussians):
        _, alphas = compositor.composite(project_one(gaussians, cam), torch.zeros(1, len(gaussians), 1), 40, 40)
        return float(alphas[0, 10:30, 10:30].mean())

    assert coverage(plane) > 0.95 and coverage(coarse) > 0.9
    assert plane.decimated(1) is plane
    with pytest.raises(ValueError, match="expected a factor >= 1, got 0"):
        plane.decimated(0)


def test_gaussians_reject_mismatched_shapes():
    good = random_gaussians(4, seed=0)
    with pytest.raises(ValueError, match=r"Gaussians.scales: expected shape \(4, 3\), got \(3, 3\)"):
        Gaussians(good.means, good.quats, good.scales[:3], good.opacities, good.sh)
    with pytest.raises(ValueError, match="K=5"):
        Gaussians(good.means, good.quats, good.scales, good.opacities, torch.zeros(4, 5, 3))


# --- PLY -------------------------------------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 40), st.integers(0, 3), st.integers(0, 10_000))
def test_ply_round_trip(tmp_path_factory, count, degree, seed):
    gaussians = random_gaussians(count, seed, sh_degree=degree)
    path = tmp_path_factory.mktemp("ply") / "splat.ply"
    write_ply(gaussians, path)
    loaded = read_ply(path)
    for name in ("means", "scales", "opacities", "sh"):
        torch.testing.assert_close(getattr(loaded, name), getattr(gaussians, name), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(quat_to_matrix(loaded.quats), quat_to_matrix(gaussians.quats), atol=1e-6, rtol=0)


def test_ply_uses_the_standard_property_names(tmp_path):
    import plyfile

    write_ply(random_gaussians(3, seed=1, sh_degree=3), tmp_path / "a.ply")
    names = [p.name for p in plyfile.PlyData.read(str(tmp_path / "a.ply"))["vertex"].properties]
    assert names[:9] == ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
    assert names[9:54] == [f"f_rest_{i}" for i in range(45)]
    assert names[54:] == ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
    assert not list(tmp_path.glob("*.tmp"))


def test_ply_reads_red_channel_first_rest_coefficients(tmp_path):
    """f_rest is channel-major: coefficients 1..15 of red, then green, then blue."""
    gaussians = random_gaussians(2, seed=2, sh_degree=3)
    sh = torch.zeros_like(gaussians.sh)
    sh[:, 1, 0] = 1.0  # first rest coefficient, red
    sh[:, 15, 2] = 2.0  # last rest coefficient, blue
    write_ply(Gaussians(gaussians.means, gaussians.quats, gaussians.scales, gaussians.opacities, sh),
              tmp_path / "b.ply")
    import plyfile

    vertex = plyfile.PlyData.read(str(tmp_path / "b.ply"))["vertex"]
    assert np.allclose(vertex["f_rest_0"], 1.0) and np.allclose(vertex["f_rest_44"], 2.0)
    assert np.allclose(vertex["f_rest_15"], 0.0)


def test_bad_ply_files_raise_clear_errors(tmp_path):
    import plyfile

    with pytest.raises(FileNotFoundError, match="expected a 3DGS PLY file at"):
        read_ply(tmp_path / "missing.ply")
    (tmp_path / "junk.ply").write_bytes(b"this is not a ply file")
    with pytest.raises(ValueError, match="junk.ply: expected a 3DGS PLY file, could not parse it"):
        read_ply(tmp_path / "junk.ply")
    points = np.zeros(2, dtype=[("x", "f4"), ("y", "f4"), ("z", "f4")])
    plyfile.PlyData([plyfile.PlyElement.describe(points, "vertex")]).write(str(tmp_path / "points.ply"))
    with pytest.raises(ValueError, match=r"missing \['f_dc_0'"):
        read_ply(tmp_path / "points.ply")
    fields = ["x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "f_rest_0", "f_rest_1", "opacity"]
    fields += ["scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
    odd = np.ones(2, dtype=[(name, "f4") for name in fields])
    plyfile.PlyData([plyfile.PlyElement.describe(odd, "vertex")]).write(str(tmp_path / "odd.ply"))
    with pytest.raises(ValueError, match="expected 0, 9, 24 or 45 f_rest_\\* properties .* got 2"):
        read_ply(tmp_path / "odd.ply")
    write_ply(random_gaussians(2, seed=3), tmp_path / "nan.ply")
    data = plyfile.PlyData.read(str(tmp_path / "nan.ply"), mmap=False)
    data["vertex"]["x"][0] = np.nan
    data.write(str(tmp_path / "nan.ply"))
    with pytest.raises(ValueError, match="expected finite positions"):
        read_ply(tmp_path / "nan.ply")


# --- spherical harmonics ---------------------------------------------------------------------


def test_sh_basis_is_orthonormal_on_the_sphere():
    count = 200_000
    basis = sh_basis(sphere_directions(count), 16)
    gram = basis.T @ basis * (4 * math.pi / count)
    torch.testing.assert_close(gram, torch.eye(16, dtype=torch.float64), atol=2e-3, rtol=0)


@settings(deadline=None, max_examples=20)
@given(quaternions, st.sampled_from([0, 1, 2, 3]))
def test_rotated_sh_give_the_same_colours_along_turned_directions(q, degree):
    rotation = quat_to_matrix(torch.tensor(q))
    sh = random_gaussians(6, seed=degree, sh_degree=degree).sh
    directions = torch.randn(6, 3, generator=torch.Generator().manual_seed(1))
    turned = rotate_sh(sh, rotation)
    torch.testing.assert_close(sh_to_rgb(turned, directions @ rotation.T), sh_to_rgb(sh, directions),
                               atol=1e-5, rtol=1e-5)


def test_degree_zero_colour_round_trips_and_higher_bands_need_directions():
    rgb = torch.tensor([[0.1, 0.5, 0.9]])
    torch.testing.assert_close(sh_to_rgb(rgb_to_sh_dc(rgb)[:, None, :]), rgb)
    with pytest.raises(ValueError, match="need view directions"):
        sh_to_rgb(torch.zeros(1, 4, 3))


# --- projection ------------------------------------------------------------------------------


def camera(width=24, height=20, eye=(2.0, 0.5, 1.0)):
    return PinholeCamera.look_at(eye, (0.0, 0.0, 0.0), width, height, 0.8)


def project_one(gaussians: Gaussians, cam: PinholeCamera, eps2d: float = 0.3):
    return project(
        gaussians.means[None], gaussians.quats[None], gaussians.scales[None], gaussians.opacities[None],
        cam.world_to_camera[None], cam.intrinsics[None], cam.width, cam.height, eps2d=eps2d,
    )  # fmt: skip


def test_projected_centres_follow_the_pinhole_model():
    cam = camera(64, 48)
    gaussians = random_gaussians(10, seed=4)
    projected = project_one(gaussians, cam)
    local = gaussians.means @ cam.world_to_camera[:3, :3].T + cam.world_to_camera[:3, 3]
    pixels = local[:, :2] / local[:, 2:] * cam.intrinsics.diagonal()[:2] + cam.intrinsics[:2, 2]
    torch.testing.assert_close(projected.means2d[0], pixels)
    torch.testing.assert_close(projected.depths[0], local[:, 2])


def test_projected_covariance_matches_sampled_points():
    """Far and small, a Gaussian's image is close to the linearised (EWA) one."""
    cam = camera(200, 200, eye=(6.0, 0.0, 0.0))
    gaussians = Gaussians(
        means=torch.tensor([[0.2, -0.3, 0.1]]),
        quats=torch.nn.functional.normalize(torch.tensor([[0.9, 0.2, -0.3, 0.1]]), dim=1),
        scales=torch.tensor([[0.03, 0.01, 0.02]]),
        opacities=torch.tensor([0.9]),
        sh=torch.zeros(1, 1, 3),
    )
    projected = project_one(gaussians, cam, eps2d=0.0)
    a, b, c = projected.conics[0, 0].double()
    covariance_2d = torch.linalg.inv(torch.tensor([[a, b], [b, c]]))
    generator = torch.Generator().manual_seed(0)
    root = quat_to_matrix(gaussians.quats[0]).double() * gaussians.scales[0].double()
    points = gaussians.means[0].double() + torch.randn(200_000, 3, generator=generator, dtype=torch.float64) @ root.T
    local = points @ cam.world_to_camera[:3, :3].T.double() + cam.world_to_camera[:3, 3].double()
    pixels = local[:, :2] / local[:, 2:] * cam.intrinsics.diagonal()[:2].double()
    torch.testing.assert_close(torch.cov(pixels.T), covariance_2d, rtol=0.03, atol=1e-3)


def test_gaussians_behind_the_camera_or_too_faint_are_culled():
    cam = camera()
    gaussians = random_gaussians(3, seed=5)
    means = gaussians.means.clone()
    means[0] = torch.tensor([4.0, 1.0, 2.0])  # behind the eye at (2, 0.5, 1), looking at the origin
    opacities = gaussians.opacities.clone()
    opacities[1] = 0.5 / 255
    projected = project_one(Gaussians(means, gaussians.quats, gaussians.scales, opacities, gaussians.sh), cam)
    assert projected.visible[0].tolist() == [False, False, True]


# --- compositing -----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("block", [7, 64, compositor.PAIRS_PER_BLOCK])
def test_compositor_matches_the_per_pixel_reference(monkeypatch, seed, block):
    monkeypatch.setattr(compositor, "PAIRS_PER_BLOCK", block)
    cam = camera()
    views = [random_gaussians(60, seed=seed * 2 + i, opacity=(0.5, 0.998)) for i in range(2)]
    projected = project(
        torch.stack([g.means for g in views]), torch.stack([g.quats for g in views]),
        torch.stack([g.scales for g in views]) * 2, torch.stack([g.opacities for g in views]),
        cam.world_to_camera.expand(2, 4, 4), cam.intrinsics.expand(2, 3, 3), cam.width, cam.height,
    )  # fmt: skip
    features = torch.rand(2, 60, 3, generator=torch.Generator().manual_seed(seed))
    images, alphas = compositor.composite(projected, features, cam.width, cam.height)
    expected_images, expected_alphas = composite_per_pixel(projected, features, cam.width, cam.height)
    torch.testing.assert_close(images, expected_images, atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(alphas, expected_alphas, atol=2e-6, rtol=1e-5)
    assert 0.05 < float(alphas.mean()) < 0.99, "a scene too empty or too full tests little"


def test_a_pixel_stops_before_the_gaussian_that_makes_it_opaque():
    """Two wide Gaussians of opacity 0.995 on one pixel: after the first, T = 0.005; the
    second would leave 2.5e-5 <= 1e-4, so it is skipped and the pixel keeps the first colour."""
    cam = PinholeCamera.look_at((0.0, 0.0, -3.0), (0.0, 0.0, 0.0), 1, 1, 0.5, up=(0.0, 1.0, 0.0))
    gaussians = Gaussians(
        means=torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]]),
        quats=torch.tensor([[1.0, 0.0, 0.0, 0.0]] * 2),
        scales=torch.full((2, 3), 5.0),
        opacities=torch.tensor([0.995, 0.995]),
        sh=torch.zeros(2, 1, 3),
    )
    projected = project_one(gaussians, cam)
    features = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    image, alpha = compositor.composite(projected, features, 1, 1)
    assert float(alpha) == pytest.approx(0.995, abs=1e-5)
    torch.testing.assert_close(image[0, 0, 0], torch.tensor([0.995, 0.0, 0.0]), atol=1e-5, rtol=0)
    expected, _ = composite_per_pixel(projected, features, 1, 1)
    torch.testing.assert_close(image, expected, atol=1e-6, rtol=0)


# --- backends and scenes ---------------------------------------------------------------------


def test_backend_choice():
    assert isinstance(make_rasterizer("torch"), TorchRasterizer)
    with pytest.raises(ValueError, match="unknown splat backend 'optix'"):
        make_rasterizer("optix")
    if not torch.cuda.is_available():
        assert make_rasterizer("auto").name == "torch"
        with pytest.raises(ValueError, match="the gsplat backend needs a CUDA device"):
            make_rasterizer("gsplat")


def two_body_scene(sh_degree: int = 0) -> SplatScene:
    arm = random_gaussians(40, seed=11, sh_degree=sh_degree, spread=0.1)
    box = random_gaussians(30, seed=12, sh_degree=sh_degree, spread=0.05)
    offset = pose_matrix(torch.tensor([0.05, 0.0, -0.02]), torch.tensor([0.9, 0.0, 0.3, 0.0]))
    table = random_gaussians(80, seed=13, spread=0.6)
    table = Gaussians(table.means * torch.tensor([1.0, 1.0, 0.0]) - torch.tensor([0, 0, 0.3]), table.quats,
                      table.scales, table.opacities, table.sh)  # fmt: skip
    return SplatScene(
        bodies=(RigidBody("arm", arm, offset), RigidBody("box", box, torch.eye(4))),
        background=table,
        backdrop_colour=(0.2, 0.3, 0.4),
    )


def poses(*translations) -> torch.Tensor:
    """(B, 2, 4, 4) poses for the arm and the box, one batch entry per pair of translations."""
    rotation = torch.tensor([0.96, 0.0, 0.0, 0.28])
    return torch.stack(
        [
            torch.stack([pose_matrix(torch.tensor(a), rotation), pose_matrix(torch.tensor(b), rotation)])
            for a, b in translations
        ]
    )


def test_a_batch_renders_like_its_images_one_by_one():
    renderer = SceneRenderer(two_body_scene(), camera(32, 24), TorchRasterizer())
    batch = poses(([0.0, 0.0, 0.0], [0.2, 0.1, 0.0]), ([0.1, -0.1, 0.05], [-0.2, 0.2, 0.0]), ([0, 0, 0], [0, 0, 0.2]))
    together = renderer.render(batch)
    assert together.shape == (3, 24, 32, 3) and together.dtype == torch.uint8
    for index in range(3):
        torch.testing.assert_close(renderer.render(batch[index : index + 1])[0], together[index])
    assert not torch.equal(together[0], together[1])


def test_renderers_of_other_cameras_and_backgrounds_render_together_in_one_call(monkeypatch):
    """Each row through its own renderer (camera, background), all in one rasterizer call, looks as
    that renderer draws it alone; the CPU rasterizer's passes split a batch without changing it."""
    scene = two_body_scene(sh_degree=1)
    rasterizer = TorchRasterizer()
    nominal = SceneRenderer(scene, camera(32, 24), rasterizer)
    moved = SceneRenderer(scene, camera(32, 24, eye=(1.9, 0.6, 1.1)), rasterizer)
    plain = SceneRenderer(SplatScene(bodies=scene.bodies, backdrop_colour=(0.9, 0.1, 0.1)), camera(32, 24), rasterizer)
    renderers = [nominal, moved, plain, nominal]
    batch = poses(([0.0, 0.0, 0.0], [0.2, 0.1, 0.0]), ([0.1, -0.1, 0.05], [-0.2, 0.2, 0.0]),
                  ([0, 0, 0], [0, 0, 0.2]), ([0.05, 0, 0], [0.1, 0.1, 0.0]))  # fmt: skip
    alone = torch.cat([renderer.render(batch[index : index + 1]) for index, renderer in enumerate(renderers)])
    calls = []
    original = rasterizer.rasterize
    monkeypatch.setattr(rasterizer, "rasterize", lambda *args: calls.append(args[0].shape[0]) or original(*args))
    together = render_together(renderers, batch)
    assert calls == [4]  # the backgrounds were cached by the renders alone
    assert (together.int() - alone.int()).abs().max() <= 1
    assert not torch.equal(together[0], together[3]) and not torch.equal(together[1], together[2])
    monkeypatch.setattr(backends, "PIXELS_PER_PASS", 32 * 24)  # one image a pass
    assert (render_together(renderers, batch).int() - together.int()).abs().max() <= 1
    with pytest.raises(ValueError, match="renderers must share image size"):
        render_together([nominal, SceneRenderer(scene, camera(24, 20), rasterizer)], batch[:2])


def test_cached_background_renders_the_same_as_a_fresh_one():
    scene = two_body_scene()
    batch = poses(([0.0, 0.0, 0.0], [0.2, 0.1, 0.0]))
    cached = SceneRenderer(scene, camera(32, 24), TorchRasterizer(), cache_background=True)
    cached.render(batch)
    fresh = SceneRenderer(scene, camera(32, 24), TorchRasterizer(), cache_background=False)
    torch.testing.assert_close(cached.render(batch), fresh.render(batch))


def test_bodies_render_where_their_poses_put_them():
    """A body rendered at pose P looks like its Gaussians moved by P @ asset_to_body and
    drawn as a static scene; view-dependent colour included."""
    scene = two_body_scene(sh_degree=2)
    cam = camera(32, 24)
    batch = poses(([0.05, -0.1, 0.02], [0.2, 0.1, 0.0]))
    moving = SceneRenderer(scene, cam, TorchRasterizer()).render_layers(batch)
    placed = [body.gaussians.transformed(batch[0, i] @ body.asset_to_body) for i, body in enumerate(scene.bodies)]
    world = Gaussians.concat(placed)
    directions = torch.cat(
        [
            ((g.means - cam.position) @ (batch[0, i, :3, :3] @ body.asset_to_body[:3, :3]))
            for i, (g, body) in enumerate(zip(placed, scene.bodies))
        ]
    )
    colours = sh_to_rgb(world.sh, directions)
    static = TorchRasterizer().rasterize(
        world.means[None], world.quats[None], world.scales[None], world.opacities[None], colours[None],
        cam.world_to_camera[None], cam.intrinsics[None], cam.width, cam.height,
    )  # fmt: skip
    torch.testing.assert_close(moving[0], static[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(moving[1], static[1], atol=1e-5, rtol=1e-4)


def test_view_dependent_colour_turns_with_the_body():
    """Turning the body and the camera together about the origin changes nothing in the image."""
    scene = SplatScene(bodies=(RigidBody("arm", random_gaussians(50, seed=14, sh_degree=3, spread=0.1), torch.eye(4)),))
    turn = pose_matrix(torch.zeros(3), torch.nn.functional.normalize(torch.tensor([0.8, 0.3, -0.2, 0.4]), dim=0))
    cam = camera(32, 24)
    turned_cam = PinholeCamera(cam.width, cam.height, cam.intrinsics, cam.world_to_camera @ torch.linalg.inv(turn))
    before = SceneRenderer(scene, cam, TorchRasterizer()).render_layers(torch.eye(4)[None, None])
    after = SceneRenderer(scene, turned_cam, TorchRasterizer()).render_layers(turn[None, None])
    torch.testing.assert_close(before[0], after[0], atol=2e-5, rtol=1e-4)


def test_body_masks_account_for_occlusion_and_reject_unknown_names():
    scene = two_body_scene()
    renderer = SceneRenderer(scene, camera(32, 24), TorchRasterizer())
    apart = poses(([0.0, 0.3, 0.0], [0.0, -0.3, 0.0]))
    box_alone = renderer.body_masks(apart, ["box"])
    assert box_alone.sum() > 5 and not (box_alone & renderer.body_masks(apart, ["arm"])).any()
    eye = torch.tensor([2.0, 0.5, 1.0])
    in_front = poses(([*(0.5 * eye).tolist()], [0.0, 0.0, 0.0]))  # the arm halfway to the camera, before the box
    hidden = renderer.body_masks(in_front, ["box"]).sum()
    shown = renderer.body_masks(poses(([0.0, 0.6, 0.0], [0.0, 0.0, 0.0])), ["box"]).sum()
    assert hidden < shown
    with pytest.raises(ValueError, match=r"unknown bodies \['lid'\]"):
        renderer.body_masks(apart, ["lid"])
    with pytest.raises(ValueError, match=r"expected body poses of shape \(B, 2, 4, 4\)"):
        renderer.render(torch.eye(4)[None, None])


@pytest.mark.gpu
def test_gsplat_and_torch_backends_render_the_same_image():
    """Needs CUDA: gsplat's kernels against ours on the same scene and cameras."""
    scene = two_body_scene(sh_degree=1)
    cam = camera(64, 48)
    batch = poses(([0.0, 0.0, 0.0], [0.2, 0.1, 0.0]), ([0.1, -0.1, 0.05], [-0.2, 0.2, 0.0]))
    on_gpu = SceneRenderer(scene, cam, make_rasterizer("gsplat", "cuda")).render_layers(batch.cuda())
    on_cpu = SceneRenderer(scene, cam, make_rasterizer("torch", "cpu")).render_layers(batch)
    torch.testing.assert_close(on_gpu[0].cpu(), on_cpu[0], atol=2e-3, rtol=1e-2)
    torch.testing.assert_close(on_gpu[1].cpu(), on_cpu[1], atol=2e-3, rtol=1e-2)


@pytest.mark.gpu
def test_torch_rasterizer_renders_on_cuda_as_on_the_cpu():
    """Needs CUDA: the PyTorch rasterizer keeps every tensor it makes on the scene's device."""
    scene = two_body_scene(sh_degree=1)
    cam = camera(64, 48)
    batch = poses(([0.0, 0.0, 0.0], [0.2, 0.1, 0.0]), ([0.1, -0.1, 0.05], [-0.2, 0.2, 0.0]))
    on_gpu = SceneRenderer(scene, cam, make_rasterizer("torch", "cuda")).render(batch.cuda())
    on_cpu = SceneRenderer(scene, cam, make_rasterizer("torch", "cpu")).render(batch)
    assert on_gpu.device.type == "cuda"
    assert (on_gpu.cpu().int() - on_cpu.int()).abs().max() <= 1


@pytest.mark.gpu
def test_renderers_of_other_cameras_render_together_in_one_gsplat_call():
    """Needs CUDA: GSEnv's one-call render of every env's look through gsplat (what the env workers do on a
    GPU) draws each row as its renderer draws it alone, and as the CPU rasterizer draws it."""
    scene = two_body_scene(sh_degree=1)
    gsplat, cpu = make_rasterizer("gsplat", "cuda"), TorchRasterizer()
    views = [dict(), dict(eye=(1.9, 0.6, 1.1)), dict()]
    on_gpu = [SceneRenderer(scene, camera(32, 24, **view), gsplat) for view in views]
    on_cpu = [SceneRenderer(scene, camera(32, 24, **view), cpu) for view in views]
    batch = poses(([0.0, 0.0, 0.0], [0.2, 0.1, 0.0]), ([0.1, -0.1, 0.05], [-0.2, 0.2, 0.0]), ([0, 0, 0], [0, 0, 0.2]))
    alone = torch.cat([renderer.render(batch[index : index + 1].cuda()) for index, renderer in enumerate(on_gpu)])
    together = render_together(on_gpu, batch.cuda())
    assert together.device.type == "cuda"
    assert (together.int() - alone.int()).abs().max() <= 1
    assert (together.cpu().int() - render_together(on_cpu, batch).int()).abs().max() <= 2
