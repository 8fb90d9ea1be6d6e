"""GSEnv's robustness split without a simulator: seeded looks, and what each does to a splat render.

The scene here is synthetic (two bodies over a table of flat Gaussians, 48x64 px); the env-level
tests are in test_gsenv.py.
"""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vlarl_envs import family_of
from vlarl_envs.gsenv.layout import sample_layout
from vlarl_envs.gsenv.restyle import (
    LookRenderers,
    jittered_camera,
    pattern_mask,
    recoloured,
    restyled_renderer,
    restyled_scene,
)
from vlarl_envs.gsenv.robustness import (
    NOMINAL,
    PATTERNS,
    VARIATIONS,
    BackgroundStyle,
    Look,
    sample_look,
    variation,
)
from vlarl_envs.splats.backends import TorchRasterizer
from vlarl_envs.splats.camera import PinholeCamera
from vlarl_envs.splats.gaussians import Gaussians
from vlarl_envs.splats.scene import RigidBody, SceneRenderer, SplatScene
from vlarl_envs.splats.sh import rgb_to_sh_dc, sh_to_rgb

GSENV_ID = "vlarl/GSEnv-PutCubeOnPlate-v0"
EPISODES = range(60)


def test_robustness_episodes_are_seeded_and_cycle_the_variations():
    assert [variation("robustness", k) for k in range(6)] == [*VARIATIONS, *VARIATIONS]
    assert [sample_look("robustness", k).variation for k in range(6)] == [*VARIATIONS, *VARIATIONS]
    for k in EPISODES:
        assert sample_look("robustness", k) == sample_look("robustness", k)
        assert sample_look("train", k) is NOMINAL and sample_look("test", k) is NOMINAL
    looks = [sample_look("robustness", k) for k in EPISODES]
    assert len(set(looks)) == len(looks), "every episode looks different"
    family = family_of(GSENV_ID)
    assert family.splits(GSENV_ID) == ("train", "test", "robustness")
    assert [family.group("PutCubeOnPlate", "robustness", k) for k in (3, 4, 5)] == list(VARIATIONS)
    assert family.group("PutCubeOnPlate", "train", 3) is family.group("PutCubeOnPlate", "test", 4) is None


def test_robustness_replays_test_layouts_and_training_layouts_stay_put():
    for k in EPISODES:
        assert sample_layout("robustness", k) == sample_layout("test", k)
    # The layouts these episodes had before the robustness split existed: training is unchanged.
    assert sample_layout("train", 0).cube_xy == pytest.approx((0.5146531037178618, 0.11777013992694185))
    assert sample_layout("train", 7).plate_xy == pytest.approx((0.4962410899816214, -0.07908097445234798))
    assert sample_layout("test", 0).cube_yaw == pytest.approx(-0.5589527732652728)


def test_looks_stay_within_their_ranges():
    for k in EPISODES:
        look = sample_look("robustness", k)
        if look.variation == "camera":
            assert 0.02 <= np.linalg.norm(look.camera_shift) <= 0.05
            assert math.radians(1) <= np.linalg.norm(look.camera_turn) <= math.radians(3)
            assert look.brightness == 1.0 and look.background is None
        elif look.variation == "appearance":
            assert 0.1 <= abs(look.brightness - 1) <= 0.3
            assert all(0.85 <= v <= 1.15 for v in look.tint)
            assert [part for part, _ in look.part_tints] == ["robot", "cube", "plate", "table"]
            assert look.camera_shift == (0.0, 0.0, 0.0) and look.background is None
        else:
            assert look.background.pattern in PATTERNS and 0.04 <= look.background.period <= 0.12
            assert look.brightness == 1.0 and look.camera_shift == (0.0, 0.0, 0.0)


# --- what a look does to a render --------------------------------------------------------------


def flat_gaussians(means, colour, scale=(0.012, 0.012, 0.002), opacity=0.95, sh_degree=0) -> Gaussians:
    count = len(means)
    sh = torch.zeros(count, (sh_degree + 1) ** 2, 3)
    sh[:, 0] = rgb_to_sh_dc(torch.tensor(colour))
    if sh_degree:
        sh[:, 1:] = 0.05 * torch.randn(count, sh.shape[1] - 1, 3, generator=torch.Generator().manual_seed(0))
    return Gaussians(
        means=torch.as_tensor(means, dtype=torch.float32),
        quats=torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(count, 1),
        scales=torch.tensor([scale]).repeat(count, 1),
        opacities=torch.full((count,), opacity),
        sh=sh,
    )


def box(centre, half, step=0.008):
    axes = [torch.arange(c - h, c + h + 1e-9, step) for c, h in zip(centre, half)]
    return torch.cartesian_prod(*axes)


def synthetic_renderer() -> SceneRenderer:
    """A cube and a 'link' over a 40 cm table, with a grey backdrop, at 48x64."""
    table = flat_gaussians(box((0.0, 0.0, 0.0), (0.2, 0.2, 0.0)), (0.6, 0.45, 0.3))
    bodies = (
        RigidBody("cube", flat_gaussians(box((0, 0, 0), (0.03, 0.03, 0.03)), (0.85, 0.1, 0.1), (0.01,) * 3, 0.99),
                  torch.eye(4)),
        RigidBody("panda_link0",
                  flat_gaussians(box((0, 0, 0), (0.02, 0.02, 0.08)), (0.9, 0.9, 0.9), (0.01,) * 3, 0.99, sh_degree=1),
                  torch.eye(4)),
    )  # fmt: skip
    scene = SplatScene(bodies, background=table, backdrop=torch.full((6, 8, 3), 0.5))
    camera = PinholeCamera.look_at((0.55, -0.2, 0.4), (0.0, 0.0, 0.03), 64, 48, math.radians(50))
    return SceneRenderer(scene, camera, TorchRasterizer())


@pytest.fixture(scope="module")
def renderer():
    return synthetic_renderer()


POSES = torch.stack([torch.eye(4), torch.eye(4)])[None]
POSES[0, 0, :3, 3] = torch.tensor([0.05, 0.05, 0.03])
POSES[0, 1, :3, 3] = torch.tensor([-0.05, -0.05, 0.08])


def render(renderer) -> np.ndarray:
    return renderer.render(POSES)[0].numpy().astype(int)


def test_camera_variation_moves_and_turns_the_camera(renderer):
    look = sample_look("robustness", 0)
    assert look.variation == "camera"
    moved = jittered_camera(renderer.camera, look)
    shift = (moved.position - renderer.camera.position).numpy()
    np.testing.assert_allclose(shift, look.camera_shift, atol=1e-6)
    relative = moved.world_to_camera[:3, :3] @ renderer.camera.world_to_camera[:3, :3].T
    angle = math.acos(max(-1.0, min(1.0, (float(torch.trace(relative)) - 1) / 2)))
    assert angle == pytest.approx(float(np.linalg.norm(look.camera_turn)), abs=1e-4)
    torch.testing.assert_close(moved.intrinsics, renderer.camera.intrinsics)
    restyled = restyled_renderer(renderer, look)
    assert restyled.scene is renderer.scene, "a camera look leaves the splats alone"
    changed = np.abs(render(restyled) - render(renderer)).max(-1) > 10
    assert changed.mean() > 0.03, "the view moved"


def test_appearance_variation_scales_colours_and_keeps_geometry(renderer):
    look = sample_look("robustness", 1)
    assert look.variation == "appearance"
    restyled = restyled_renderer(renderer, look)
    clean, varied = render(renderer), render(restyled)
    assert abs(varied.mean() - clean.mean()) > 5 or np.abs(varied.mean((0, 1)) - clean.mean((0, 1))).max() > 5
    for names in (["cube"], ["panda_link0"]):
        torch.testing.assert_close(restyled.body_masks(POSES, names), renderer.body_masks(POSES, names))
    torch.testing.assert_close(restyled.camera.world_to_camera, renderer.camera.world_to_camera)
    # exact in SH space, view-dependent bands included
    link = renderer.scene.bodies[1].gaussians
    factor = look.colour_factor("robot")
    directions = torch.randn(len(link), 3)
    torch.testing.assert_close(
        sh_to_rgb(recoloured(link, factor).sh, directions),
        sh_to_rgb(link.sh, directions) * torch.tensor(factor).float(),
    )


def test_background_variation_changes_only_the_background(renderer):
    look = sample_look("robustness", 2)
    assert look.variation == "background"
    restyled = restyled_renderer(renderer, look)
    clean, varied = render(renderer), render(restyled)
    covered = renderer.body_masks(POSES, ["cube", "panda_link0"], threshold=0.999)[0].numpy()
    uncovered = ~renderer.body_masks(POSES, ["cube", "panda_link0"], threshold=0.001)[0].numpy()
    assert covered.sum() > 20 and uncovered.sum() > 1000
    assert np.abs(varied - clean)[covered].max() <= 1, "bodies look the same"
    changed = np.abs(varied - clean).max(-1) > 10
    assert changed[uncovered].mean() > 0.8, "the table and backdrop changed"
    assert restyled.scene.bodies is renderer.scene.bodies


def test_background_patterns_use_both_colours():
    points = torch.cartesian_prod(torch.linspace(-0.3, 0.3, 40), torch.linspace(-0.3, 0.3, 40), torch.zeros(1))
    for pattern in PATTERNS:
        style = BackgroundStyle(
            pattern, ((0.1, 0.1, 0.1), (0.9, 0.9, 0.9)), 0.08, 0.4, (0.2, 0.7), ((0, 0, 0), (1, 1, 1))
        )
        share = pattern_mask(points, style).float().mean()
        assert 0.2 < share < 0.8, (pattern, share)
    with pytest.raises(ValueError, match="unknown background pattern 'plaid'"):
        pattern_mask(points, BackgroundStyle("plaid", style.colours, 0.1, 0.0, (0, 0), style.backdrop))


def test_nominal_and_camera_looks_reuse_the_scene(renderer):
    assert restyled_scene(renderer.scene, NOMINAL) is renderer.scene
    assert restyled_scene(renderer.scene, Look("camera", camera_shift=(0.01, 0, 0))) is renderer.scene


def test_look_renderers_are_cached(renderer):
    renderers = LookRenderers(renderer, keep=1)
    assert renderers(NOMINAL) is renderer
    first, second = sample_look("robustness", 0), sample_look("robustness", 3)
    assert renderers(first) is renderers(first) is not renderer
    kept = renderers(first)
    renderers(second)
    assert renderers(first) is not kept, "keep=1 holds only the latest restyled renderer"
