"""Pinhole cameras in the OpenCV convention (x right, y down, z forward).

Pixel (col, row) covers [col, col + 1) x [row, row + 1); its centre is at (col + 0.5, row + 0.5),
the convention of gsplat, so both backends sample the same points.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PinholeCamera:
    """A camera that renders ``height`` x ``width`` images.

    Attributes:
        width, height: image size in pixels.
        intrinsics: float32 (3, 3) [[fx, 0, cx], [0, fy, cy], [0, 0, 1]].
        world_to_camera: float32 (4, 4) rigid transform into the OpenCV camera frame.
    """

    width: int
    height: int
    intrinsics: torch.Tensor
    world_to_camera: torch.Tensor

    def __post_init__(self) -> None:
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"PinholeCamera: expected a positive image size, got {self.width}x{self.height}")
        if tuple(self.intrinsics.shape) != (3, 3):
            raise ValueError(f"PinholeCamera.intrinsics: expected shape (3, 3), got {tuple(self.intrinsics.shape)}")
        if tuple(self.world_to_camera.shape) != (4, 4):
            raise ValueError(
                f"PinholeCamera.world_to_camera: expected shape (4, 4), got {tuple(self.world_to_camera.shape)}"
            )

    @property
    def position(self) -> torch.Tensor:
        """The camera centre (3,) in world coordinates."""
        rotation, translation = self.world_to_camera[:3, :3], self.world_to_camera[:3, 3]
        return -rotation.T @ translation

    def resized(self, width: int, height: int) -> PinholeCamera:
        """The same camera rendering ``height`` x ``width`` images (intrinsics scaled per axis)."""
        scale = torch.tensor([[width / self.width], [height / self.height], [1.0]], dtype=self.intrinsics.dtype)
        return PinholeCamera(width, height, self.intrinsics * scale, self.world_to_camera)

    @staticmethod
    def from_extrinsic(width: int, height: int, intrinsics, extrinsic) -> PinholeCamera:
        """From an intrinsic matrix (3, 3) and an OpenCV world-to-camera extrinsic (3, 4) or (4, 4)."""
        extrinsic = torch.as_tensor(extrinsic, dtype=torch.float32)
        world_to_camera = torch.eye(4)
        world_to_camera[: extrinsic.shape[0], :] = extrinsic
        return PinholeCamera(width, height, torch.as_tensor(intrinsics, dtype=torch.float32), world_to_camera)

    @staticmethod
    def look_at(
        eye: Sequence[float],
        target: Sequence[float],
        width: int,
        height: int,
        vertical_fov: float,
        up: Sequence[float] = (0.0, 0.0, 1.0),
    ) -> PinholeCamera:
        """A camera at ``eye`` looking at ``target``, square pixels, principal point at the centre.

        Args:
            vertical_fov: full vertical field of view in radians.
        """
        eye_t = torch.tensor(eye, dtype=torch.float32)
        forward = torch.tensor(target, dtype=torch.float32) - eye_t
        forward = forward / torch.linalg.vector_norm(forward)
        right = torch.linalg.cross(forward, torch.tensor(up, dtype=torch.float32))
        if torch.linalg.vector_norm(right) < 1e-6:
            raise ValueError(f"PinholeCamera.look_at: the view direction {forward.tolist()} is parallel to up {up}")
        right = right / torch.linalg.vector_norm(right)
        down = torch.linalg.cross(forward, right)
        rotation = torch.stack([right, down, forward])  # rows: camera axes in world coordinates
        world_to_camera = torch.eye(4)
        world_to_camera[:3, :3] = rotation
        world_to_camera[:3, 3] = -rotation @ eye_t
        focal = (height / 2) / torch.tan(torch.tensor(vertical_fov / 2))
        intrinsics = torch.tensor([[focal, 0.0, width / 2], [0.0, focal, height / 2], [0.0, 0.0, 1.0]])
        return PinholeCamera(width, height, intrinsics, world_to_camera)
