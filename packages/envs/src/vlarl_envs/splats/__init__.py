"""3D Gaussian splatting: assets (3DGS PLY), scenes of rigid bodies, and two renderers.

- ``Gaussians``, ``read_ply`` / ``write_ply``: splat assets in the standard 3DGS PLY format.
- ``SplatScene``, ``RigidBody``, ``SceneRenderer``: a static background plus bodies that move
  with a simulator, rendered in batches with a cached background; ``render_together``: a batch
  whose rows each have a renderer of their own (camera, colours), in one rasterizer call.
- ``make_rasterizer``: gsplat's CUDA rasterizer or ``TorchRasterizer``, a vectorized PyTorch
  one for CPUs; both give the same image.

Needs torch (and plyfile for PLY files): ``pip install 'vlarl-envs[gsenv]'``.
"""

from vlarl_envs.splats.backends import GsplatRasterizer, Rasterizer, TorchRasterizer, make_rasterizer
from vlarl_envs.splats.camera import PinholeCamera
from vlarl_envs.splats.gaussians import Gaussians
from vlarl_envs.splats.ply import read_ply, write_ply
from vlarl_envs.splats.scene import RigidBody, SceneRenderer, SplatScene, render_together

__all__ = [
    "Gaussians",
    "GsplatRasterizer",
    "PinholeCamera",
    "Rasterizer",
    "RigidBody",
    "SceneRenderer",
    "SplatScene",
    "TorchRasterizer",
    "make_rasterizer",
    "read_ply",
    "render_together",
    "write_ply",
]
