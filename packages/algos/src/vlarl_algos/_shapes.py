"""Shape checks shared by the public functions.

Every public function validates its inputs up front, so a mismatched rollout fails with a
ValueError that names the argument, the expected shape and the shape that came, instead of
broadcasting silently into a wrong loss.
"""

import torch


def check_ndim(name: str, tensor: torch.Tensor, ndims: tuple[int, ...], expected: str) -> None:
    """Raises ValueError unless ``tensor.ndim`` is one of ``ndims``.

    Args:
        name: argument name used in the message.
        tensor: the tensor to check.
        ndims: the accepted numbers of dimensions.
        expected: the expected layout in words, e.g. "[T, B] or [T, B, C]".
    """
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape {expected}, got {type(tensor).__name__}")
    if tensor.ndim not in ndims:
        raise ValueError(f"{name} must have shape {expected}, got shape {tuple(tensor.shape)}")


def check_shape(name: str, tensor: torch.Tensor, shape: tuple[int, ...], expected: str) -> None:
    """Raises ValueError unless ``tensor.shape == shape``.

    Args:
        name: argument name used in the message.
        tensor: the tensor to check.
        shape: the exact shape required.
        expected: the expected layout in words, e.g. "[T + 1, B]".
    """
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape {expected}, got {type(tensor).__name__}")
    if tuple(tensor.shape) != tuple(shape):
        raise ValueError(
            f"{name} must have shape {expected} = {tuple(shape)}, got shape {tuple(tensor.shape)}"
        )


def expand_prefix(name: str, tensor: torch.Tensor, shape: torch.Size, target: str) -> torch.Tensor:
    """Broadcasts ``tensor`` whose shape is a prefix of ``shape`` by adding trailing axes.

    Time-first tensors line up on their leading axes: a per-chunk advantage ``[T, B]``
    applies to every action ``[T, B, C]`` and every token ``[T, B, C, A]`` of that chunk.
    PyTorch broadcasting aligns trailing axes instead, so the trailing axes are added here.

    Args:
        name: argument name used in the message.
        tensor: a tensor whose shape is a prefix of ``shape``.
        shape: the shape to expand to.
        target: the name of the tensor that fixes ``shape``, for the message.

    Returns:
        A view of ``tensor`` expanded to ``shape``.
    """
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tuple(tensor.shape) != tuple(shape[: tensor.ndim]):
        raise ValueError(
            f"{name} must have the leading shape of {target} {tuple(shape)} (a prefix of it), "
            f"got shape {tuple(tensor.shape)}"
        )
    if tensor.ndim == len(shape):
        return tensor
    return tensor.reshape(tensor.shape + (1,) * (len(shape) - tensor.ndim)).expand(shape)
