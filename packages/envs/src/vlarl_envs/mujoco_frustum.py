"""Rendering a MuJoCo camera without the geoms it cannot see.

On a CPU, Mesa's llvmpipe spends most of a small frame transforming vertices: it shades every triangle of
the scene, in view or not, before clipping, so a camera that sees a small part of a detailed scene (LIBERO's
wrist camera: the table and the gripper, not the arm or the pedestal) pays for all of it. A geom whose
bounding sphere lies wholly outside the camera's view frustum writes no pixel as long as nothing else draws
it again (shadows and reflections), so hiding it while the camera renders leaves the frame exactly as it
was. docs/benchmarks.md ("Per family") has what it saves.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

NEVER_CULLED_TYPES = (0, 1)
"""``mjGEOM_PLANE`` and ``mjGEOM_HFIELD``: unbounded or large, and cheap to draw."""

PERSPECTIVE = 0
"""``mjPROJ_PERSPECTIVE``, the projection ``geoms_outside_view`` knows."""


def frustum_applies(model: Any, camera_id: int, scene_flags: Any, shadow_flag: int, reflection_flag: int) -> bool:
    """Whether geoms outside the camera's view can be left out exactly: no shadow or reflection pass
    (which draw geoms from other viewpoints), and a perspective camera that its ``fovy`` describes (not
    one given by sensor intrinsics)."""
    if scene_flags[shadow_flag] or scene_flags[reflection_flag]:
        return False
    if int(getattr(model, "cam_projection", np.zeros(model.ncam))[camera_id]) != PERSPECTIVE:
        return False
    return not np.any(getattr(model, "cam_sensorsize", np.zeros((model.ncam, 2)))[camera_id])


def geoms_outside_view(model: Any, data: Any, camera_id: int, width: int, height: int) -> np.ndarray:
    """Indices of the geoms whose bounding spheres lie wholly outside camera ``camera_id``'s view frustum
    at a ``width`` x ``height`` viewport, for the geom and camera poses ``data`` holds (what
    ``mjv_updateScene`` draws from): behind its near plane, beyond its far plane or past a side."""
    centers_local = model.geom_aabb[:, :3]
    radii = np.linalg.norm(model.geom_aabb[:, 3:], axis=1)
    centers = data.geom_xpos + np.einsum("gij,gj->gi", data.geom_xmat.reshape(-1, 3, 3), centers_local)
    rotation = data.cam_xmat[camera_id].reshape(3, 3)
    local = (centers - data.cam_xpos[camera_id]) @ rotation  # camera frame: x right, y up, looking along -z
    depth = -local[:, 2]
    near, far = model.vis.map.znear * model.stat.extent, model.vis.map.zfar * model.stat.extent
    tan_y = np.tan(np.deg2rad(model.cam_fovy[camera_id]) / 2)
    tan_x = tan_y * width / height
    outside = (depth + radii < near) | (depth - radii > far)
    for axis, tan in ((0, tan_x), (1, tan_y)):
        outside |= (np.abs(local[:, axis]) - depth * tan) / np.hypot(1.0, tan) > radii
    outside &= ~np.isin(model.geom_type, NEVER_CULLED_TYPES)
    return np.flatnonzero(outside)


@contextmanager
def visible_geoms_only(model: Any, data: Any, camera_id: int, width: int, height: int,
                       geomgroup: Any) -> Iterator[None]:
    """Move the geoms outside the camera's view into a geom group that ``geomgroup`` (the scene options'
    visible groups) hides, for the duration of one render; their groups come back after it. Nothing is
    hidden when every group is visible."""
    hidden_groups = [group for group, shown in enumerate(geomgroup) if not shown]
    if not hidden_groups:
        yield
        return
    outside = geoms_outside_view(model, data, camera_id, width, height)
    groups = model.geom_group[outside].copy()
    model.geom_group[outside] = hidden_groups[0]
    try:
        yield
    finally:
        model.geom_group[outside] = groups
