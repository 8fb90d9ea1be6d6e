"""The vision split's image overlays as arithmetic on image batches: torch, no simulator."""

import pytest

torch = pytest.importorskip("torch")

from vlarl_envs.maniskill.put_on_plate.appearance import OVERLAY_TEXTURES
from vlarl_envs.maniskill.put_on_plate.overlay import blend_overlays, foreground_boxes, texture_bank

SIZE = 32


def scene(top: int, left: int) -> tuple:
    """A grey image with a dark 8x10 'robot' whose top-left corner is at (top, left)."""
    rgb = torch.full((SIZE, SIZE, 3), 120, dtype=torch.uint8)
    foreground = torch.zeros(SIZE, SIZE, dtype=torch.bool)
    foreground[top:top + 8, left:left + 10] = True
    rgb[foreground] = 40
    return rgb, foreground


def blend(rgb, foreground, strength, whole, texture=3):
    bank = texture_bank(64)
    strengths, whole_images = torch.tensor([strength]), torch.tensor([whole])
    return blend_overlays(rgb[None], foreground[None], bank[[texture]], strengths, whole_images)[0]


def test_texture_bank_holds_every_texture_as_a_float_image():
    bank = texture_bank(48)
    assert bank.shape == (len(OVERLAY_TEXTURES), 3, 48, 48) and bank.dtype == torch.float32
    assert 0 <= float(bank.min()) and float(bank.max()) <= 255


def test_foreground_boxes_are_inclusive_and_cover_the_image_when_empty():
    _, foreground = scene(5, 7)
    masks = torch.stack([foreground, torch.zeros_like(foreground)])
    boxes, empty = foreground_boxes(masks)
    assert boxes.tolist() == [[7.0, 5.0, 16.0, 12.0], [0.0, 0.0, SIZE - 1.0, SIZE - 1.0]]
    assert empty.tolist() == [False, True]


def test_texture_overlay_changes_the_foreground_only_and_more_when_stronger():
    rgb, foreground = scene(5, 7)
    weak, strong = blend(rgb, foreground, 0.3, False), blend(rgb, foreground, 0.5, False)
    for image in (weak, strong):
        assert torch.equal(image[~foreground], rgb[~foreground])
        assert (image[foreground] != rgb[foreground]).any(dim=-1).float().mean() > 0.9
    change = {name: (image.float() - rgb.float()).abs()[foreground].mean() for name, image in
              (("weak", weak), ("strong", strong))}
    assert change["strong"] / change["weak"] == pytest.approx(5 / 3, rel=0.05)
    assert torch.equal(blend(rgb, foreground, 0.0, False), rgb)


def test_noise_overlay_changes_every_pixel_and_follows_the_foreground():
    rgb, foreground = scene(5, 7)
    weak, strong = blend(rgb, foreground, 0.3, True), blend(rgb, foreground, 0.5, True)
    assert (weak != rgb).any(dim=-1).float().mean() > 0.9
    assert (strong.float() - rgb.float()).abs().mean() > (weak.float() - rgb.float()).abs().mean()
    moved_rgb, moved_foreground = scene(18, 15)
    moved = blend(moved_rgb, moved_foreground, 0.5, True)
    background = ~foreground & ~moved_foreground
    assert not torch.equal(moved[background], strong[background]), "the texture window moves with the robot"


def test_a_batch_blends_each_sub_scene_with_its_own_overlay():
    rgb, foreground = scene(5, 7)
    bank = texture_bank(64)
    batch = blend_overlays(
        rgb.expand(3, -1, -1, -1), foreground.expand(3, -1, -1), bank[[0, 3, 5]], torch.tensor([0.0, 0.3, 0.5]),
        torch.tensor([False, False, True]),
    )
    assert torch.equal(batch[0], rgb)
    assert torch.equal(batch[1], blend(rgb, foreground, 0.3, False, texture=3))
    assert torch.equal(batch[2], blend(rgb, foreground, 0.5, True, texture=5))
