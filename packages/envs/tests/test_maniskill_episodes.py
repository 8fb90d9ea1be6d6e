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
    OVERLAY_STRENGTHS,
    OVERLAY_TEXTURES,
    TRAIN_TABLES,
    UNSEEN_TABLES,
    train_lighting,
)
from vlarl_envs.maniskill.put_on_plate.episodes import (
    CLEARANCE,
    FINGER_REACH,
    REST_QPOS,
    TRAIN_REGION,
)
from vlarl_envs.maniskill.put_on_plate.objects import COLOURS, OBJECTS_BY_NAME, shape_of
from vlarl_envs.maniskill.put_on_plate.receptacles import (
    ALL_RECEPTACLES,
    RECEPTACLES_BY_NAME,
    RIM_MARGIN,
    TRAIN_RECEPTACLE,
    UNSEEN_RECEPTACLES,
)

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
    with pytest.raises(ValueError, match=r"episodes 0\.\.209, got 210"):
        make_episode("semantic", 210)
    with pytest.raises(ValueError, match="unknown PutOnPlate split 'ood'"):
        make_episode("ood", 0)


def test_train_episodes_stay_in_distribution(episodes):
    unseen_names = {spec.name for spec in UNSEEN_OBJECTS}
    train_tables = {look.name for look in TRAIN_TABLES}
    for episode in episodes["train"]:
        assert episode.variation == "none" and episode.move is None and episode.overlay is None
        assert [r.name for r in episode.receptacles] == [TRAIN_RECEPTACLE.name]
        assert not {p.name for p in episode.placements} & unseen_names
        assert episode.table in train_tables
        assert episode.instruction == f"put the {episode.target} on the plate"
        assert len(episode.placements) == 1  # RL4VLA's training scene: the object and the plate alone
        assert all(in_train_region(p.x, p.y) for p in episode.placements)
        assert np.allclose(episode.camera_target, CAMERA_TARGET)
        assert np.linalg.norm(np.subtract(episode.camera_eye, CAMERA_EYE)) < 0.01
        assert np.linalg.norm(np.subtract(episode.robot_qpos[:7], REST_QPOS[:7])) < 0.2


def test_layouts_leave_room_between_objects_and_around_the_target(episodes):
    for split_episodes_ in episodes.values():
        for episode in split_episodes_:
            circles = []
            for receptacle in episode.receptacles:
                centre, radius = np.array([receptacle.x, receptacle.y]), RECEPTACLES_BY_NAME[receptacle.name].footprint
                for other, other_radius in circles:
                    assert np.linalg.norm(centre - other) >= radius + other_radius + CLEARANCE - 1e-9
                circles.append((centre, radius))
            for index, placement in enumerate(episode.placements):
                spec = OBJECTS_BY_NAME[placement.name]
                reach = max(spec.footprint, FINGER_REACH) if index == 0 else spec.footprint
                centre = np.array([placement.x, placement.y])
                for other, radius in circles:
                    assert np.linalg.norm(centre - other) >= radius + reach + CLEARANCE - 1e-9
                circles.append((centre, reach))


def test_each_ood_split_cycles_through_its_variations(episodes):
    assert VARIATIONS["vision"][3:] == ("texture_weak", "texture_strong", "noise_weak", "noise_strong")
    assert VARIATIONS["semantic"][3:] == ("plate", "multi_plate")
    assert {split: SPLIT_SIZES[split] for split in OOD_SPLITS} == {"vision": 210, "semantic": 210, "execution": 210}
    for split in OOD_SPLITS:
        variations = VARIATIONS[split]
        assert SPLIT_SIZES[split] % len(variations) == 0
        counts = {variation: 0 for variation in variations}
        for episode in episodes[split]:
            assert episode.variation == variations[episode.episode_id % len(variations)]
            counts[episode.variation] += 1
        assert set(counts.values()) == {SPLIT_SIZES[split] // len(variations)}
        block = [make_episode(split, k).variation for k in range(40, 40 + len(variations))]
        assert sorted(block) == sorted(variations), "a contiguous block of ids covers every variation once"


def test_vision_split_changes_only_what_the_camera_sees(episodes):
    unseen_tables = {look.name for look in UNSEEN_TABLES}
    neutral = [train_lighting(np.random.default_rng(k)) for k in range(200)]
    key_range = (min(light.key_colour[0] for light in neutral), max(light.key_colour[0] for light in neutral))
    for episode in episodes["vision"]:
        assert episode.instruction == f"put the {episode.target} on the plate"
        assert [r.name for r in episode.receptacles] == [TRAIN_RECEPTACLE.name]
        if episode.variation.startswith(("texture_", "noise_")):
            kind, strength = episode.variation.split("_")
            overlay = episode.overlay
            assert overlay.kind == kind and overlay.strength == OVERLAY_STRENGTHS[strength]
            assert 0 <= overlay.texture < len(OVERLAY_TEXTURES)
            assert episode.table in {look.name for look in TRAIN_TABLES}
        else:
            assert episode.overlay is None
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


def test_only_multi_object_episodes_have_distractors(episodes):
    for split_episodes_ in episodes.values():
        for episode in split_episodes_:
            assert (len(episode.placements) > 1) == (episode.variation == "multi_object"), episode


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
        names = [receptacle.name for receptacle in episode.receptacles]
        if episode.variation == "plate":
            assert len(names) == 1 and names[0] in {r.name for r in UNSEEN_RECEPTACLES}
            assert episode.instruction == f"put the {episode.target} on the {names[0]}"
        elif episode.variation == "multi_plate":
            assert len(names) == len(set(names)) == 2
            assert episode.instruction == f"put the {episode.target} on the {names[0]}"
            assert names[1] not in episode.instruction, "the instruction names the target receptacle only"
        else:
            assert names == [TRAIN_RECEPTACLE.name]
        assert episode.overlay is None


def test_receptacle_variations_cover_every_unseen_receptacle_and_both_multi_plate_kinds(episodes):
    semantic = episodes["semantic"]
    unseen_names = {r.name for r in UNSEEN_RECEPTACLES}
    assert {e.receptacle for e in semantic if e.variation == "plate"} == unseen_names
    multi = [e for e in semantic if e.variation == "multi_plate"]
    assert any(e.receptacle == TRAIN_RECEPTACLE.name for e in multi), "the plate named beside an unseen receptacle"
    assert any({r.name for r in e.receptacles} <= unseen_names for e in multi), "two unseen receptacles"


def test_receptacles_are_named_apart_and_hold_every_object():
    names = [spec.name for spec in ALL_RECEPTACLES]
    assert len(set(names)) == len(names) and not set(names) & set(OBJECTS_BY_NAME)
    assert TRAIN_RECEPTACLE not in UNSEEN_RECEPTACLES
    for spec in UNSEEN_RECEPTACLES:
        assert "plate" not in spec.name, "'the plate' must name the training plate alone"
        assert INSTRUCTION_SPACE.contains(spec.name)
        assert (spec.shape, spec.colour, spec.half_size) != (TRAIN_RECEPTACLE.shape, TRAIN_RECEPTACLE.colour,
                                                             TRAIN_RECEPTACLE.half_size)
    for spec in ALL_RECEPTACLES:
        assert spec.half_size - RIM_MARGIN >= 0.06 and spec.footprint < 0.13


def test_every_instruction_is_in_the_instruction_set(episodes):
    """The instruction set is the tokenizer corpus of a new policy: it must hold every sentence."""
    sentences = {sentence for options in PUT_ON_PLATE_INSTRUCTIONS.sentences.values() for sentence in options}
    for split_episodes_ in episodes.values():
        for episode in split_episodes_:
            assert episode.instruction in sentences, episode.instruction


def test_overlay_textures_are_procedural_distinct_and_deterministic():
    images = [texture.image(64) for texture in OVERLAY_TEXTURES]
    assert len(OVERLAY_TEXTURES) == 16 and len({texture.name for texture in OVERLAY_TEXTURES}) == 16
    for texture, image in zip(OVERLAY_TEXTURES, images):
        assert image.shape == (64, 64, 3) and image.dtype == np.uint8
        assert image.std() > 10, texture.name
        np.testing.assert_array_equal(image, texture.image(64))
    assert len({image.tobytes() for image in images}) == 16


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


def test_train_takes_every_id_the_trainer_draws():
    """The trainer draws training episode ids from [0, 2**31): each is a layout of its own."""
    assert make_episode("train", 2**31 - 1).split == "train"
    assert make_episode("train", 1826701615) != make_episode("train", 1826701616)
    with pytest.raises(ValueError, match=r"episodes 0\.\.2147483647, got 2147483648"):
        make_episode("train", 2**31)
