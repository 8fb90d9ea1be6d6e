"""Hiding the geoms a MuJoCo camera cannot see: which ones, that they come back, and that frames stay exact."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vlarl_envs.mujoco_frustum import frustum_applies, geoms_outside_view, visible_geoms_only

SIZE = 48
BOXES = 12


def scene(positions, with_floor=True) -> tuple[mujoco.MjModel, mujoco.MjData]:
    """A camera at the origin looking along -z (45-degree fovy) and one small box per position."""
    boxes = "".join(
        f'<geom name="box{i}" type="box" size="0.05 0.08 0.03" pos="{x:.4f} {y:.4f} {z:.4f}" euler="0.3 {i} 0.7"'
        f' rgba="{i % 3 / 2} 0.5 0.2 1"/>'
        for i, (x, y, z) in enumerate(positions)
    )
    floor = '<geom type="plane" size="5 5 0.1" pos="0 0 -20" rgba="0.3 0.3 0.3 1"/>' if with_floor else ""
    xml = (f'<mujoco><visual><global offwidth="{SIZE}" offheight="{SIZE}"/><quality shadowsize="0"/></visual>'
           f'<worldbody><light pos="0 0 1" dir="0 0 -1"/><camera name="eye" pos="0 0 0" fovy="45"/>{floor}{boxes}'
           '</worldbody></mujoco>')
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    return model, data


def test_geoms_in_front_are_kept_and_those_behind_beside_or_beyond_are_left_out():
    positions = [(0, 0, -1), (0.45, 0, -1), (0, 0, 1), (3, 0, -1), (0, -3, -1), (0, 0, -100)]
    model, data = scene(positions, with_floor=False)
    model.vis.map.zfar = 50.0 / model.stat.extent  # 50 m, so the box at 100 m lies beyond it
    outside = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g)
               for g in geoms_outside_view(model, data, 0, SIZE, SIZE)}
    # box1 straddles the frustum's right side (tan 22.5 deg at 1 m is 0.41 m): partly in view, kept.
    assert outside == {"box2", "box3", "box4", "box5"}


def test_a_wider_viewport_sees_further_to_the_sides():
    model, data = scene([(0.7, 0, -1)], with_floor=False)
    assert list(geoms_outside_view(model, data, 0, SIZE, SIZE)) == [0]
    assert list(geoms_outside_view(model, data, 0, 2 * SIZE, SIZE)) == []


def corners_outside_one_plane(model, data, geom, width, height) -> bool:
    """Whether all eight corners of the geom's bounding box lie outside one plane of the frustum."""
    center, half = model.geom_aabb[geom, :3], model.geom_aabb[geom, 3:]
    signs = np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).reshape(3, -1).T
    corners = data.geom_xpos[geom] + (center + signs * half) @ data.geom_xmat[geom].reshape(3, 3).T
    local = (corners - data.cam_xpos[0]) @ data.cam_xmat[0].reshape(3, 3)
    depth = -local[:, 2]
    tan_y = np.tan(np.deg2rad(model.cam_fovy[0]) / 2)
    tan_x = tan_y * width / height
    near, far = model.vis.map.znear * model.stat.extent, model.vis.map.zfar * model.stat.extent
    return bool(np.all(depth < near) or np.all(depth > far)
                or np.all(local[:, 0] > depth * tan_x) or np.all(-local[:, 0] > depth * tan_x)
                or np.all(local[:, 1] > depth * tan_y) or np.all(-local[:, 1] > depth * tan_y))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(*[st.floats(-2, 2)] * 3), min_size=1, max_size=8), st.integers(16, 96))
def test_a_geom_left_out_lies_wholly_beyond_one_plane_of_the_frustum(positions, width):
    model, data = scene(positions, with_floor=False)
    for geom in geoms_outside_view(model, data, 0, width, SIZE):
        assert corners_outside_one_plane(model, data, geom, width, SIZE)


def test_planes_are_never_left_out():
    model, data = scene([(0, 0, -1)])
    assert 0 not in geoms_outside_view(model, data, 0, SIZE, SIZE)  # the floor lies behind the camera's view


def test_hidden_geoms_get_their_groups_back_even_when_the_render_fails():
    model, data = scene([(0, 0, -1), (0, 0, 1)])
    groups = model.geom_group.copy()
    with pytest.raises(RuntimeError), visible_geoms_only(model, data, 0, SIZE, SIZE, [1, 1, 1, 0, 0, 0]):
        assert model.geom_group[2] == 3  # the box behind the camera, moved into the first hidden group
        raise RuntimeError("render failed")
    np.testing.assert_array_equal(model.geom_group, groups)


def test_nothing_is_hidden_when_every_group_is_shown_or_the_scene_draws_shadows():
    model, data = scene([(0, 0, 1)])
    with visible_geoms_only(model, data, 0, SIZE, SIZE, [1] * 6):
        assert not model.geom_group.any()
    flags = np.zeros(len(mujoco.mjtRndFlag.__members__), np.uint8)
    shadow, reflection = mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION
    assert frustum_applies(model, 0, flags, shadow, reflection)
    flags[shadow] = 1
    assert not frustum_applies(model, 0, flags, shadow, reflection)


@pytest.mark.sim
def test_frames_with_unseen_geoms_hidden_equal_full_frames():
    rng = np.random.default_rng(0)
    positions = rng.uniform(-1.5, 1.5, (BOXES, 3)) - [0, 0, 1.5]
    model, data = scene(positions)
    options = mujoco.MjvOption()
    flags = mujoco.mjtRndFlag
    with mujoco.Renderer(model, SIZE, SIZE) as renderer:
        renderer.scene.flags[flags.mjRND_SHADOW] = renderer.scene.flags[flags.mjRND_REFLECTION] = 0
        renderer.update_scene(data, camera="eye", scene_option=options)
        assert frustum_applies(model, 0, renderer.scene.flags, flags.mjRND_SHADOW, flags.mjRND_REFLECTION)
        full = renderer.render().copy()
        hidden = geoms_outside_view(model, data, 0, SIZE, SIZE)
        with visible_geoms_only(model, data, 0, SIZE, SIZE, options.geomgroup):
            renderer.update_scene(data, camera="eye", scene_option=options)
            culled = renderer.render().copy()
    assert len(hidden) >= 3 and full.any()
    np.testing.assert_array_equal(culled, full)
