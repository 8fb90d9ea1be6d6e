"""Render a robustness ``Look`` (``vlarl_envs.gsenv.robustness``): restyled splat scenes and cameras.

A look never touches the geometry of the bodies: the camera moves, colours are scaled in
spherical-harmonic space (exactly, view-dependent bands included), the table's Gaussians get
procedural colours and the backdrop a procedural image. ``LookRenderers`` keeps one
``SceneRenderer`` per look seen recently, the nominal one always.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import replace

import numpy as np
import torch

from vlarl_envs.gsenv.robustness import BackgroundStyle, Look
from vlarl_envs.splats.camera import PinholeCamera
from vlarl_envs.splats.gaussians import Gaussians
from vlarl_envs.splats.scene import SceneRenderer, SplatScene
from vlarl_envs.splats.sh import SH_C0, rgb_to_sh_dc

OBJECT_PARTS = ("cube", "plate")
"""Bodies tinted as themselves; every other body is a robot link."""
BACKDROP_SIZE = (120, 160)
"""(H, W) of the procedural backdrop (resized to the camera like any backdrop)."""


def rotation_vector_matrix(vector) -> torch.Tensor:
    """float32 (3, 3) rotation by ``|vector|`` radians about ``vector`` (Rodrigues)."""
    vector = torch.as_tensor(vector, dtype=torch.float32)
    angle = float(torch.linalg.vector_norm(vector))
    if angle < 1e-12:
        return torch.eye(3)
    x, y, z = (vector / angle).tolist()
    cross = torch.tensor([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return torch.eye(3) + math.sin(angle) * cross + (1 - math.cos(angle)) * cross @ cross


def jittered_camera(camera: PinholeCamera, look: Look) -> PinholeCamera:
    """``camera`` with its centre moved by ``look.camera_shift`` (world) and turned by
    ``look.camera_turn`` (a rotation vector in the camera's frame); intrinsics unchanged."""
    rotation = camera.world_to_camera[:3, :3]
    centre = camera.position + torch.tensor(look.camera_shift, dtype=rotation.dtype)
    turned = rotation_vector_matrix(look.camera_turn).T.to(rotation.dtype) @ rotation
    world_to_camera = torch.eye(4, dtype=rotation.dtype)
    world_to_camera[:3, :3] = turned
    world_to_camera[:3, 3] = -turned @ centre
    return PinholeCamera(camera.width, camera.height, camera.intrinsics, world_to_camera)


def recoloured(gaussians: Gaussians, factor) -> Gaussians:
    """The Gaussians with every rendered colour multiplied by ``factor`` (3,) per channel.

    A colour is 0.5 + the SH sum, so the DC term absorbs the 0.5 and the other bands scale.
    """
    factor = torch.as_tensor(np.asarray(factor), dtype=gaussians.sh.dtype)
    sh = gaussians.sh * factor
    sh[:, 0] = (factor * (SH_C0 * gaussians.sh[:, 0] + 0.5) - 0.5) / SH_C0
    return Gaussians(gaussians.means, gaussians.quats, gaussians.scales, gaussians.opacities, sh)


def pattern_mask(points: torch.Tensor, style: BackgroundStyle) -> torch.Tensor:
    """bool (N,): which of ``style``'s two colours each point (N, 3) takes, from its world xy."""
    cosine, sine = math.cos(style.angle), math.sin(style.angle)
    x, y = points[:, 0].double(), points[:, 1].double()
    u = (cosine * x + sine * y) / style.period + style.phase[0]
    v = (-sine * x + cosine * y) / style.period + style.phase[1]
    if style.pattern == "checker":
        return ((torch.floor(u) + torch.floor(v)) % 2).bool()
    if style.pattern == "stripes":
        return (torch.floor(u) % 2).bool()
    if style.pattern == "blotches":  # three waves 60 degrees apart
        waves = [u, 0.5 * u + 0.866 * v, -0.5 * u + 0.866 * v]
        phases = (0.0, style.phase[0], style.phase[1])
        return sum(torch.sin(2 * math.pi * (wave + phase)) for wave, phase in zip(waves, phases)) > 0
    raise ValueError(f"unknown background pattern {style.pattern!r}; expected checker, stripes or blotches")


def patterned(gaussians: Gaussians, style: BackgroundStyle) -> Gaussians:
    """World-frame Gaussians recoloured with ``style``'s pattern (view-independent colours)."""
    colours = torch.tensor(style.colours, dtype=gaussians.sh.dtype)
    rgb = colours[pattern_mask(gaussians.means, style).long()]
    return Gaussians(gaussians.means, gaussians.quats, gaussians.scales, gaussians.opacities,
                     rgb_to_sh_dc(rgb)[:, None])


def procedural_backdrop(style: BackgroundStyle, size: tuple[int, int] = BACKDROP_SIZE) -> torch.Tensor:
    """float32 (H, W, 3): a vertical gradient from ``style.backdrop[0]`` (top) to ``[1]`` (bottom)."""
    top, bottom = (torch.tensor(colour, dtype=torch.float32) for colour in style.backdrop)
    rows = torch.linspace(0.0, 1.0, size[0])[:, None]
    return ((1 - rows) * top + rows * bottom)[:, None, :].expand(size[0], size[1], 3).contiguous()


def part_of(body_name: str) -> str:
    """The ``robustness.PARTS`` entry a body is tinted as."""
    return body_name if body_name in OBJECT_PARTS else "robot"


def restyled_scene(scene: SplatScene, look: Look) -> SplatScene:
    """``scene`` as ``look`` colours it (the same scene when the look only moves the camera)."""
    background, backdrop = scene.background, scene.backdrop
    backdrop_colour = scene.backdrop_colour
    if look.background is not None:
        background = patterned(background, look.background) if background is not None else None
        backdrop = procedural_backdrop(look.background)
    bodies = scene.bodies
    if look.brightness != 1.0 or look.tint != (1.0, 1.0, 1.0) or look.part_tints:
        bodies = tuple(
            replace(body, gaussians=recoloured(body.gaussians, look.colour_factor(part_of(body.name))))
            for body in bodies
        )
        if background is not None:
            background = recoloured(background, look.colour_factor("table"))
        room = look.brightness * np.asarray(look.tint)
        if backdrop is not None:
            backdrop = (backdrop * torch.tensor(room, dtype=backdrop.dtype)).clamp(0, 1)
        backdrop_colour = tuple(float(v) for v in np.clip(np.asarray(backdrop_colour) * room, 0, 1))
    if bodies is scene.bodies and background is scene.background and backdrop is scene.backdrop:
        return scene
    return SplatScene(bodies=bodies, background=background, backdrop=backdrop, backdrop_colour=backdrop_colour)


def restyled_renderer(renderer: SceneRenderer, look: Look) -> SceneRenderer:
    """A renderer of ``renderer``'s scene and camera under ``look`` (``renderer`` itself for the nominal look)."""
    if look.is_nominal:
        return renderer
    return SceneRenderer(
        restyled_scene(renderer.scene, look),
        jittered_camera(renderer.camera, look),
        renderer.rasterizer,
        renderer.cache_background,
    )


class LookRenderers:
    """The renderer of each look: the nominal renderer, and restyled ones built on demand and
    kept for the ``keep`` most recent looks (each holds its own copy of the body Gaussians)."""

    def __init__(self, nominal: SceneRenderer, keep: int = 1) -> None:
        self.nominal = nominal
        self.keep = max(1, int(keep))
        self._restyled: OrderedDict[Look, SceneRenderer] = OrderedDict()

    def __call__(self, look: Look) -> SceneRenderer:
        if look.is_nominal:
            return self.nominal
        if look not in self._restyled:
            self._restyled[look] = restyled_renderer(self.nominal, look)
            while len(self._restyled) > self.keep:
                self._restyled.popitem(last=False)
        self._restyled.move_to_end(look)
        return self._restyled[look]

