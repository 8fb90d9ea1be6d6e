"""PutOnPlate's objects, instructions and split episode lists: pure Python, no simulator needed."""

import math

import numpy as np
import pytest

from vlarl_envs.contract import INSTRUCTION_SPACE
from vlarl_envs.maniskill.put_on_plate import (
    ALL_OBJECTS,
    PUT_ON_PLATE_INSTRUCTIONS,
    SPLIT_SIZES,
    TRAIN_OBJECTS,
    UNSEEN_OBJECTS,
    VARIATIONS,
    make_episode,
    split_episodes,
)
from vlarl_envs.maniskill.put_on_plate.appearance import (
    CAMERA_EYE,
    CAMERA_TARGET,
    TRAIN_TABLES,
    UNSEEN_TABLES,
    train_lighting,
)
from vlarl_envs.maniskill.put_on_plate.episodes import (
    CLEARANCE,
    FINGER_REACH,
    PLATE_RADIUS,
    REST_QPOS,
    TRAIN_REGION,
)
from vlarl_envs.maniskill.put_on_plate.objects import COLOURS, OBJECTS_BY_NAME, shape_of

OOD_SPLITS = ("vision", "semantic", "execution")
GRIPPER_OPENING = 0.08


def in_train_region(x, y, margin=1e-9):
    (x_low, x_high), (y_low, y_high) = TRAIN_REGION
    return x_low - margin <= x <= x_high + margin and y_low - margin <= y <= y_high + margin


@pytest.fixture(scope="module")
def episodes():
    """The first 60 train episodes and every episode of the out-of-distribution splits."""
    lists = {split: split_episodes(split) for split in OOD_SPLITS}
    lists["train"] = [make_episode("train", k) for k in range(60)]
    return lists


def test_at_least_25_distinct_named_graspable_objects():
    assert len(TRAIN_OBJECTS) >= 25
    names = [spec.name for spec in ALL_OBJECTS]
    assert len(set(names)) == len(names)
    looks = {(shape_of(spec), spec.colour, round(spec.height, 3), round(spec.footprint, 3)) for spec in ALL_OBJECTS}
    assert len(looks) == len(ALL_OBJECTS), "two objects share shape, colour and size"
    assert len({shape_of(spec) for spec in TRAIN_OBJECTS}) >= 10
    assert len({spec.colour for spec in TRAIN_OBJECTS}) >= 10
    for spec in ALL_OBJECTS:
        assert spec.colour in COLOURS
        assert INSTRUCTION_SPACE.contains(spec.name)


def half_extent_along(part, direction):
    """Half the part's width along a horizontal unit ``direction``."""
    dx, dy = abs(direction[0]), abs(direction[1])
    if part.kind == "box":
        return dx * part.size[0] + dy * part.size[1]
    if part.kind == "sphere" or part.axis == "z":
        return part.size[0]
    radius, half_length = part.size
    along = half_length + (radius if part.kind == "capsule" else 0.0)
    return (dx * along + dy * radius) if part.axis == "x" else (dx * radius + dy * along)


def test_every_object_fits_the_open_gripper_where_it_is_grasped():
    for spec in ALL_OBJECTS:
        closing = np.array([math.cos(spec.grasp_yaw), math.sin(spec.grasp_yaw)])
        across = np.array([-closing[1], closing[0]])
        grasp_xy = np.array(spec.grasp_point[:2])
        width = 0.0
        for part in spec.parts:
            offset = np.array(part.offset[:2]) - grasp_xy
            if abs(part.offset[2] - spec.grasp_point[2]) > part.half_height():
                continue  # the fingertips close above or below this part
            if abs(float(across @ offset)) > half_extent_along(part, across) + 0.01:
                continue  # beside the finger pads, not between them
            width = max(width, abs(float(closing @ offset)) + half_extent_along(part, closing))
        assert 0 < 2 * width < GRIPPER_OPENING - 0.01, spec.name


def test_unseen_objects_are_new_names_in_new_colours_or_shapes():
    train_names = {spec.name for spec in TRAIN_OBJECTS}
    train_looks = {(shape_of(spec), spec.colour) for spec in TRAIN_OBJECTS}
    for spec in UNSEEN_OBJECTS:
        assert spec.name not in train_names
        assert (shape_of(spec), spec.colour) not in train_looks


def test_instructions_name_the_object_and_hold_out_phrasings():
    for spec in ALL_OBJECTS:
        canonical = PUT_ON_PLATE_INSTRUCTIONS.canonical(spec.name)
        assert canonical == f"put the {spec.name} on the plate"
        paraphrases = PUT_ON_PLATE_INSTRUCTIONS.paraphrases(spec.name)
        assert len(set(paraphrases)) >= 5 and canonical not in paraphrases
        assert all(spec.name in sentence for sentence in paraphrases)


def test_episodes_are_fixed_lists_replayed_by_id():
    assert make_episode("vision", 17) == make_episode("vision", 17)
    assert make_episode("train", 3) != make_episode("train", 4)
    assert make_episode("train", 3) != make_episode("execution", 3)
    for split in OOD_SPLITS:
        assert len(split_episodes(split)) == SPLIT_SIZES[split]
    with pytest.raises(ValueError, match=r"episodes 0\.\.149, got 150"):
        make_episode("semantic", 150)
    with pytest.raises(ValueError, match="unknown PutOnPlate split 'ood'"):
        make_episode("ood", 0)


def test_train_episodes_stay_in_distribution(episodes):
    unseen_names = {spec.name for spec in UNSEEN_OBJECTS}
    train_tables = {look.name for look in TRAIN_TABLES}
    for episode in episodes["train"]:
        assert episode.variation == "none" and episode.move is None
        assert not {p.name for p in episode.placements} & unseen_names
        assert episode.table in train_tables
        assert episode.instruction == f"put the {episode.target} on the plate"
        assert 2 <= len(episode.placements) <= 4
        assert all(in_train_region(p.x, p.y) for p in episode.placements)
        assert np.allclose(episode.camera_target, CAMERA_TARGET)
        assert np.linalg.norm(np.subtract(episode.camera_eye, CAMERA_EYE)) < 0.01
        assert np.linalg.norm(np.subtract(episode.robot_qpos[:7], REST_QPOS[:7])) < 0.2


def test_layouts_leave_room_between_objects_and_around_the_target(episodes):
    for split_episodes_ in episodes.values():
        for episode in split_episodes_:
            circles = [(np.array(episode.plate_xy), PLATE_RADIUS)]
            for index, placement in enumerate(episode.placements):
                spec = OBJECTS_BY_NAME[placement.name]
                reach = max(spec.footprint, FINGER_REACH) if index == 0 else spec.footprint
                centre = np.array([placement.x, placement.y])
                for other, radius in circles:
                    assert np.linalg.norm(centre - other) >= radius + reach + CLEARANCE - 1e-9
                circles.append((centre, reach))


def test_each_ood_split_cycles_through_its_variations(episodes):
    for split in OOD_SPLITS:
        counts = {variation: 0 for variation in VARIATIONS[split]}
        for episode in episodes[split]:
            assert episode.variation == VARIATIONS[split][episode.episode_id % 3]
            counts[episode.variation] += 1
        assert set(counts.values()) == {SPLIT_SIZES[split] // 3}


def test_vision_split_changes_only_what_the_camera_sees(episodes):
    unseen_tables = {look.name for look in UNSEEN_TABLES}
    neutral = [train_lighting(np.random.default_rng(k)) for k in range(200)]
    key_range = (min(light.key_colour[0] for light in neutral), max(light.key_colour[0] for light in neutral))
    for episode in episodes["vision"]:
        assert episode.instruction == f"put the {episode.target} on the plate"
        if episode.variation == "table":
            assert episode.table in unseen_tables
        if episode.variation == "lighting":
            colour = episode.lighting.key_colour
            tinted = max(colour) - min(colour) > 0.1
            out_of_range = not key_range[0] <= colour[0] <= key_range[1]
            low_angle = episode.lighting.key_direction[2] > -0.5
            assert tinted or out_of_range or low_angle
        if episode.variation == "camera":
            assert np.linalg.norm(np.subtract(episode.camera_eye, CAMERA_EYE)) >= 0.04 - 1e-9


def test_semantic_split_tests_language_and_unseen_objects(episodes):
    unseen_names = {spec.name for spec in UNSEEN_OBJECTS}
    for episode in episodes["semantic"]:
        target = OBJECTS_BY_NAME[episode.target]
        if episode.variation == "object":
            assert episode.target in unseen_names
        if episode.variation == "instruction":
            assert episode.instruction in PUT_ON_PLATE_INSTRUCTIONS.paraphrases(episode.target)
        if episode.variation == "multi_object":
            distractors = [OBJECTS_BY_NAME[p.name] for p in episode.placements[1:]]
            assert len(distractors) >= 4
            similar = [d for d in distractors if d.colour == target.colour or shape_of(d) == shape_of(target)]
            assert len(similar) >= 2, episode.target


def test_execution_split_moves_start_states(episodes):
    for episode in episodes["execution"]:
        target = episode.placements[0]
        if episode.variation == "position":
            assert not in_train_region(target.x, target.y)
        if episode.variation == "robot_pose":
            assert np.linalg.norm(np.subtract(episode.robot_qpos[:7], REST_QPOS[:7])) >= 0.35
        if episode.variation == "moved_object":
            move = episode.move
            assert move is not None and 6 <= move.step <= 12
            assert np.hypot(move.x - target.x, move.y - target.y) >= 0.08
        else:
            assert episode.move is None
