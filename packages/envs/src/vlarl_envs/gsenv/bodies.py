"""The simulated bodies a splat scene follows: their meshes, reference poses and live poses.

Works on a built ``PutCubeOnPlateTask`` (one ManiSkill scene). A *body* is a robot link with
visual geometry, or the cube or the plate; the table never moves and is the background.
"""

from __future__ import annotations

import numpy as np
import sapien
import torch

from vlarl_envs.gsenv.capture import Capture, link_key
from vlarl_envs.splats.gaussians import pose_matrix
from vlarl_envs.splats.scene import RigidBody, SplatScene
from vlarl_envs.splats.surface import ColouredMesh

MOVING_OBJECTS = ("cube", "plate")
FULL_DETAIL_HEIGHT = 200
"""Image height (px) from which bodies keep all their Gaussians; see ``auto_decimation``."""
MAX_DECIMATION = 8


def auto_decimation(image_height: int) -> int:
    """How many body Gaussians to merge into one for images ``image_height`` pixels tall.

    Below about 200 px the built assets' Gaussians are smaller than a pixel, yet each still
    costs a dozen pixel evaluations; keeping 1 in (200 / H)^2 of them, widened (see
    ``Gaussians.decimated``), renders the same surfaces: 2 at 128 px, 4 at 96 px, 1 at 224 px.
    """
    return int(min(MAX_DECIMATION, max(1, (FULL_DETAIL_HEIGHT / image_height) ** 2)))


def _render_shapes(entity) -> list:
    body = entity.find_component_by_type(sapien.render.RenderBodyComponent)
    return [] if body is None else list(body.render_shapes)


def _shape_scale(shape) -> np.ndarray:
    """Per-axis scale from a render shape's unit mesh to its true size."""
    if isinstance(shape, sapien.render.RenderShapeBox):
        return np.asarray(shape.half_size, dtype=float)
    if isinstance(shape, sapien.render.RenderShapeCylinder):
        return np.array([shape.half_length, shape.radius, shape.radius], dtype=float)
    if isinstance(shape, sapien.render.RenderShapeSphere):
        return np.full(3, shape.radius, dtype=float)
    if isinstance(shape, sapien.render.RenderShapeTriangleMesh):
        return np.asarray(shape.scale, dtype=float)
    raise ValueError(f"cannot turn a {type(shape).__name__} into splats; expected a box, cylinder, sphere or mesh")


def visual_mesh(entity) -> ColouredMesh | None:
    """All visual shapes of a sapien entity as one coloured mesh in the entity's frame."""
    meshes = []
    for shape in _render_shapes(entity):
        local = shape.local_pose.to_transformation_matrix() @ np.diag([*_shape_scale(shape), 1.0])
        for part in shape.parts:
            colour = np.asarray(part.material.base_color[:3], dtype=float)
            triangles = np.asarray(part.triangles, dtype=np.int64)
            mesh = ColouredMesh(np.asarray(part.vertices, dtype=float), triangles, np.tile(colour, (len(triangles), 1)))
            meshes.append(mesh.transformed(local))
    return ColouredMesh.concat(meshes) if meshes else None


def visual_links(task) -> list:
    """The robot's links that have visual geometry (ManiSkill ``Link`` objects), in link order."""
    return [link for link in task.agent.robot.get_links() if _render_shapes(link._objs[0].entity)]


def reference_link_poses(task, qpos) -> dict[str, np.ndarray]:
    """Each link's (4, 4) pose in the robot base frame at joints ``qpos``, from forward kinematics."""
    model = task.agent.robot._objs[0].create_pinocchio_model()
    model.compute_forward_kinematics(np.asarray(qpos, dtype=float))
    return {
        link.name: model.get_link_pose(index).to_transformation_matrix()
        for index, link in enumerate(task.agent.robot.get_links())
    }


def splat_scene(task, capture: Capture, decimation: int = 1) -> SplatScene:
    """Bind a capture to the task: one rigid body per visual link, the cube and the plate.

    ``decimation`` > 1 keeps 1 in ``decimation`` of each body's Gaussians, widened to cover
    the same surface (``Gaussians.decimated``); the static table keeps all of its own.
    """
    links = visual_links(task)
    parts = {link_key(name): name for name in capture.links}
    missing = [link.name for link in links if link_key(link.name) not in parts]
    if missing:
        raise ValueError(
            f"{capture.root}: the capture has no splats for links {missing}; "
            f"expected robot/{capture.robot}/parts/<link>_3dgs_abs.ply for each, found {sorted(capture.links)}"
        )
    reference = reference_link_poses(task, capture.settings.reference_qpos)
    offset = torch.eye(4)
    offset[:3, 3] = torch.tensor(capture.settings.robot_offset)
    bodies = []
    for link in links:
        base_to_link = torch.linalg.inv(torch.tensor(reference[link.name], dtype=torch.float32))
        gaussians = capture.links[parts[link_key(link.name)]].decimated(decimation)
        bodies.append(RigidBody(link.name, gaussians, base_to_link @ offset))
    for name in MOVING_OBJECTS:
        recentre = torch.eye(4)
        recentre[:3, 3] = -capture.object_origin(name)
        bodies.append(RigidBody(name, capture.objects[name].decimated(decimation), recentre))
    return SplatScene(bodies=tuple(bodies), background=capture.table, backdrop=capture.backdrop)


class BodyTracker:
    """Reads the current world poses of a scene's bodies from the task each frame."""

    def __init__(self, task, scene: SplatScene) -> None:
        links = task.agent.robot.links_map
        actors = {"cube": task.cube, "plate": task.plate}
        self._sources = [links[name] if name in links else actors[name] for name in scene.body_names]

    def poses(self) -> torch.Tensor:
        """float32 (1, G, 4, 4) world poses (ManiSkill's batch of one scene)."""
        raw = torch.cat([source.pose.raw_pose for source in self._sources]).float().cpu()  # (G, 7)
        return pose_matrix(raw[:, :3], raw[:, 3:])[None]
