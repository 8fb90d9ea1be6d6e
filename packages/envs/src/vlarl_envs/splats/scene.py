"""A splat scene: a static background plus rigid bodies that move with the simulator.

Each body (a robot link, an object) carries Gaussians in its *asset frame*, the frame its PLY
was written in, and a fixed ``asset_to_body`` transform into the body frame whose pose the
simulator reports. Rendering maps every body's Gaussians to the world with
``body_pose @ asset_to_body``; view-dependent colour is evaluated with the view direction
mapped back into the asset frame, so spherical harmonics never need rotating.

The static background is rendered once per camera and cached: only the bodies are
rasterized per frame, then blended over it and over an optional backdrop photo.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from vlarl_envs.splats.backends import Rasterizer
from vlarl_envs.splats.camera import PinholeCamera
from vlarl_envs.splats.gaussians import Gaussians, matrix_to_quat, quat_multiply
from vlarl_envs.splats.sh import sh_to_rgb


@dataclass(frozen=True)
class RigidBody:
    """Gaussians bound rigidly to one simulated body.

    Attributes:
        name: the simulator's name of the body (link or actor).
        gaussians: the Gaussians in the asset frame.
        asset_to_body: float32 (4, 4) rigid transform from the asset frame to the body frame.
    """

    name: str
    gaussians: Gaussians
    asset_to_body: torch.Tensor


@dataclass(frozen=True)
class SplatScene:
    """Everything a splat render shows.

    Attributes:
        bodies: the moving bodies, in the order of the poses ``SceneRenderer.render`` takes.
        background: static Gaussians in world coordinates (the table), or None.
        backdrop: float32 (H, W, 3) in [0, 1], the photo behind everything (resized to the
            camera), or None for a plain ``backdrop_colour``.
        backdrop_colour: RGB in [0, 1] used where no Gaussian and no photo covers a pixel.
    """

    bodies: tuple[RigidBody, ...]
    background: Gaussians | None = None
    backdrop: torch.Tensor | None = None
    backdrop_colour: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        names = [body.name for body in self.bodies]
        if len(set(names)) != len(names):
            raise ValueError(f"SplatScene: body names must be unique, got {names}")
        if self.backdrop is not None and (self.backdrop.ndim != 3 or self.backdrop.shape[-1] != 3):
            raise ValueError(
                f"SplatScene.backdrop: expected an (H, W, 3) image, got shape {tuple(self.backdrop.shape)}"
            )

    @property
    def body_names(self) -> tuple[str, ...]:
        return tuple(body.name for body in self.bodies)

    def gaussian_count(self) -> int:
        return sum(len(body.gaussians) for body in self.bodies) + (len(self.background) if self.background else 0)


class SceneRenderer:
    """Renders a ``SplatScene`` through one camera for batches of body poses.

    Args:
        scene: the scene.
        camera: the camera (shared by every image of a batch).
        rasterizer: a ``vlarl_envs.splats.backends`` rasterizer.
        cache_background: render the static background once and reuse it (exact whenever the
            background never hides a body, as a table under the robot never does).
    """

    def __init__(
        self, scene: SplatScene, camera: PinholeCamera, rasterizer: Rasterizer, cache_background: bool = True
    ) -> None:
        if not scene.bodies:
            raise ValueError("SceneRenderer: the scene has no bodies to move")
        self.scene = scene
        self.camera = camera
        self.rasterizer = rasterizer
        self.cache_background = cache_background
        device = rasterizer.device
        self.device = device
        moved = [body.gaussians.transformed(body.asset_to_body.to(body.gaussians.means.dtype)) for body in scene.bodies]
        merged = Gaussians.concat(moved)
        self._means = merged.means.to(device)  # (N, 3) body frames
        self._quats = merged.quats.to(device)
        self._scales = merged.scales.to(device)
        self._opacities = merged.opacities.to(device)
        self._sh = merged.sh.to(device)
        counts = torch.tensor([len(body.gaussians) for body in scene.bodies])
        self._body_index = torch.repeat_interleave(torch.arange(len(scene.bodies)), counts).to(device)
        self._asset_rotations = torch.stack([body.asset_to_body[:3, :3].float() for body in scene.bodies]).to(device)
        self._static_colours = sh_to_rgb(self._sh) if merged.sh_degree == 0 else None
        self._view = camera.world_to_camera.to(device)
        self._intrinsics = camera.intrinsics.to(device)
        self._backdrop = self._resized_backdrop()
        self._background_cache: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def body_count(self) -> int:
        return len(self.scene.bodies)

    def _resized_backdrop(self) -> torch.Tensor:
        """The backdrop (H, W, 3) at the camera's resolution."""
        height, width = self.camera.height, self.camera.width
        if self.scene.backdrop is None:
            return torch.tensor(self.scene.backdrop_colour, device=self.device).expand(height, width, 3)
        photo = self.scene.backdrop.float().permute(2, 0, 1)[None]
        resized = torch.nn.functional.interpolate(photo, size=(height, width), mode="bilinear", antialias=True)
        return resized[0].permute(1, 2, 0).clamp(0, 1).to(self.device)

    def _rasterize(self, means, quats, scales, opacities, features) -> tuple[torch.Tensor, torch.Tensor]:
        batch = means.shape[0]
        return self.rasterizer.rasterize(
            means,
            quats,
            scales,
            opacities,
            features,
            self._view.expand(batch, 4, 4),
            self._intrinsics.expand(batch, 3, 3),
            self.camera.width,
            self.camera.height,
        )

    def _background(self, batch: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The background's premultiplied colour (B, H, W, 3) and coverage (B, H, W), or None."""
        background = self.scene.background
        if background is None:
            return None
        if self._background_cache is None or not self.cache_background:
            gaussians = Gaussians(*(t.to(self.device) for t in (background.means, background.quats,
                                   background.scales, background.opacities, background.sh)))  # fmt: skip
            directions = gaussians.means - self.camera.position.to(self.device)
            colours = sh_to_rgb(gaussians.sh, directions)
            image, alpha = self._rasterize(
                gaussians.means[None], gaussians.quats[None], gaussians.scales[None],
                gaussians.opacities[None], colours[None],
            )  # fmt: skip
            self._background_cache = (image, alpha)
        image, alpha = self._background_cache
        return image.expand(batch, -1, -1, -1), alpha.expand(batch, -1, -1)

    def place(self, body_poses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """World-space means (B, N, 3), quats (B, N, 4) and each Gaussian's body rotation
        (B, N, 3, 3), for body poses (B, G, 4, 4)."""
        if body_poses.ndim != 4 or body_poses.shape[1:] != (self.body_count, 4, 4):
            raise ValueError(
                f"SceneRenderer: expected body poses of shape (B, {self.body_count}, 4, 4) for bodies "
                f"{list(self.scene.body_names)}, got {tuple(body_poses.shape)}"
            )
        poses = body_poses.to(self.device, torch.float32)
        rotations = poses[:, :, :3, :3].index_select(1, self._body_index)  # (B, N, 3, 3)
        translations = poses[:, :, :3, 3].index_select(1, self._body_index)
        means = (rotations * self._means[None, :, None, :]).sum(-1) + translations
        body_quats = matrix_to_quat(poses[:, :, :3, :3]).index_select(1, self._body_index)
        quats = quat_multiply(body_quats, self._quats.expand_as(body_quats))
        return means, quats, rotations

    @torch.no_grad()
    def splats(
        self, body_poses: torch.Tensor, features: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The bodies' Gaussians placed at ``body_poses`` (B, G, 4, 4), as the rasterizer takes them:
        world means (B, N, 3), quats (B, N, 4), scales (B, N, 3), opacities (B, N) and the values
        to blend (B, N, D), colours seen from the camera or ``features`` (N, D)."""
        means, quats, rotations = self.place(body_poses)
        batch = means.shape[0]
        if features is not None:
            values = features.to(self.device, torch.float32).expand(batch, -1, -1)
        elif self._static_colours is not None:
            values = self._static_colours.expand(batch, -1, -1)
        else:
            world_directions = means - self.camera.position.to(self.device)
            body_directions = (rotations * world_directions[..., :, None]).sum(-2)  # R_body^T d
            asset_rotations = self._asset_rotations.index_select(0, self._body_index)
            asset_directions = (asset_rotations * body_directions[..., :, None]).sum(-2)  # R_asset^T d
            values = sh_to_rgb(self._sh.expand(batch, -1, -1, -1), asset_directions)
        return means, quats, self._scales.expand(batch, -1, -1), self._opacities.expand(batch, -1), values

    @torch.no_grad()
    def render_layers(
        self, body_poses: torch.Tensor, features: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The bodies alone: premultiplied features (B, H, W, D) and coverage (B, H, W).

        Args:
            body_poses: (B, G, 4, 4) world poses of the bodies, in ``scene.bodies`` order.
            features: (N, D) per-Gaussian values to blend instead of colours (e.g. one-hot
                body labels for masks), or None for the Gaussians' colours.
        """
        return self._rasterize(*self.splats(body_poses, features))

    @torch.no_grad()
    def over_background(self, colour: torch.Tensor, coverage: torch.Tensor) -> torch.Tensor:
        """uint8 (B, H, W, 3) images: the bodies' layers (``render_layers``) over the background
        over the backdrop."""
        backdrop = self._backdrop
        background = self._background(colour.shape[0])
        if background is not None:
            background_colour, background_coverage = background
            backdrop = background_colour + (1 - background_coverage[..., None]) * backdrop
        image = colour + (1 - coverage[..., None]) * backdrop
        return (image.clamp(0, 1) * 255 + 0.5).to(torch.uint8)

    @torch.no_grad()
    def render(self, body_poses: torch.Tensor) -> torch.Tensor:
        """uint8 (B, H, W, 3) images: bodies over the background over the backdrop."""
        return self.over_background(*self.render_layers(body_poses))

    @torch.no_grad()
    def body_masks(self, body_poses: torch.Tensor, names: Sequence[str], threshold: float = 0.5) -> torch.Tensor:
        """bool (B, H, W): pixels where the named bodies are what the camera sees.

        Every body is rendered, so one body hiding another counts; a pixel belongs to the
        named bodies when their visible coverage of it is above ``threshold``.
        """
        unknown = set(names) - set(self.scene.body_names)
        if unknown:
            raise ValueError(f"body_masks: unknown bodies {sorted(unknown)}; scene has {list(self.scene.body_names)}")
        chosen = torch.tensor([body.name in names for body in self.scene.bodies], device=self.device)
        labels = chosen.index_select(0, self._body_index).float()[:, None]
        share, _ = self.render_layers(body_poses, features=labels)
        return share[..., 0] > threshold


@torch.no_grad()
def render_together(renderers: Sequence[SceneRenderer], body_poses: torch.Tensor) -> torch.Tensor:
    """uint8 (B, H, W, 3): image ``i`` of the bodies at ``body_poses[i]`` (B, G, 4, 4) through
    ``renderers[i]``, all B in one rasterizer call.

    The renderers may differ in camera pose, colours, background and backdrop (GSEnv's robustness
    looks, ``vlarl_envs.gsenv.restyle``) but must render the same bodies (the same number of
    Gaussians each) at one image size on one device; each row then equals ``renderers[i].render``
    of it up to float rounding in the batched compositing. The rows that share a renderer share
    its cached background. On CUDA the call is one gsplat launch; ``TorchRasterizer`` composites
    it in passes of ``PIXELS_PER_PASS`` pixels.
    """
    if len(renderers) != body_poses.shape[0]:
        raise ValueError(f"render_together: {len(renderers)} renderers for {body_poses.shape[0]} rows of body poses")
    groups: dict[int, tuple[SceneRenderer, list[int]]] = {}
    for row, renderer in enumerate(renderers):
        groups.setdefault(id(renderer), (renderer, []))[1].append(row)
    first = renderers[0]
    for renderer, _ in groups.values():
        if (renderer.camera.width, renderer.camera.height, renderer.device, renderer._means.shape) != (
            first.camera.width, first.camera.height, first.device, first._means.shape
        ):
            raise ValueError(
                "render_together: renderers must share image size, device and Gaussian count; got "
                f"{renderer.camera.width}x{renderer.camera.height} on {renderer.device} with "
                f"{len(renderer._means)} Gaussians against {first.camera.width}x{first.camera.height} on "
                f"{first.device} with {len(first._means)}"
            )
    parts = [renderer.splats(body_poses[rows]) for renderer, rows in groups.values()]
    cameras = [
        (renderer._view.expand(len(rows), 4, 4), renderer._intrinsics.expand(len(rows), 3, 3))
        for renderer, rows in groups.values()
    ]
    colour, coverage = first.rasterizer.rasterize(
        *(torch.cat([part[index] for part in parts]) for index in range(5)),
        torch.cat([view for view, _ in cameras]),
        torch.cat([intrinsics for _, intrinsics in cameras]),
        first.camera.width,
        first.camera.height,
    )
    if len(groups) == 1:
        return first.over_background(colour, coverage)
    images = torch.empty((len(renderers), first.camera.height, first.camera.width, 3), dtype=torch.uint8,
                         device=first.device)  # fmt: skip
    start = 0
    for renderer, rows in groups.values():
        stop = start + len(rows)
        images[rows] = renderer.over_background(colour[start:stop], coverage[start:stop])
        start = stop
    return images
