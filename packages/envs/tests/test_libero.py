"""LIBERO under the vlarl contract. Needs the simulator (an error in CI when missing).

Building a task's simulator takes 4-9 s on a CPU, so the tests play few tasks at 32-64 px.
"""

import contextlib
import io
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from vlarl_envs.testing import require_simulator

require_simulator("libero.libero.envs")

from vlarl_envs import family_of
from vlarl_envs.libero import INIT_STATES_PER_TASK, LIBERO_SUITES, libero_env_id, suite_tasks
from vlarl_envs.libero.suites import perturbation_tasks
from vlarl_envs.mujoco_frustum import geoms_outside_view

pytestmark = pytest.mark.sim

SPATIAL = libero_env_id("Spatial")
SUITE_SIZES = {"Spatial": 10, "Object": 10, "Goal": 10, "10": 10, "90": 90}


def libero_benchmark_tasks(suite_name):
    """The suite's tasks as LIBERO's own benchmark lists them, read independently of vlarl_envs."""
    from libero.libero import benchmark

    with contextlib.redirect_stdout(io.StringIO()):
        suite = benchmark.get_benchmark(suite_name)()
    return [suite.get_task(index) for index in range(suite.get_num_tasks())]


def test_family_lists_each_suite_with_libero_language():
    assert set(LIBERO_SUITES) == set(SUITE_SIZES)
    for suite, size in SUITE_SIZES.items():
        env_id = libero_env_id(suite)
        family = family_of(env_id)
        expected = libero_benchmark_tasks(LIBERO_SUITES[suite].name)
        assert family.name == "LIBERO" and len(expected) == size
        assert family.tasks(env_id) == tuple(task.name for task in expected)
        instructions = family.instructions(env_id)
        for task in expected:
            assert instructions.canonical(task.name) == task.language
            assert instructions.paraphrases(task.name) == ()
        assert family.splits(env_id)[:2] == ("train", "test")
    assert family_of(SPATIAL).splits(SPATIAL) == ("train", "test", "language", "position", "object", "task")
    assert family_of(libero_env_id("90")).splits(libero_env_id("90")) == ("train", "test")  # no LIBERO-Pro 90
    family = family_of(SPATIAL)
    assert len(family.feature_names["observation.state"]) == 8 and len(family.feature_names["action"]) == 7
    subset = list(family.tasks(SPATIAL)[3:5])
    assert family.tasks(SPATIAL, {"tasks": subset}) == tuple(subset)
    with pytest.raises(ValueError, match="unknown"):
        family.tasks(SPATIAL, {"tasks": ["fly_to_the_moon"]})


def test_the_family_answers_without_importing_robosuite_or_mujoco():
    code = ("import sys; from vlarl_envs import family_of; f = family_of('vlarl/LIBERO-90-v0'); "
            "print(len(f.tasks('vlarl/LIBERO-90-v0')), f.splits('vlarl/LIBERO-90-v0'), "
            "len(f.instructions('vlarl/LIBERO-90-v0').sentences)); "
            "print([m for m in ('robosuite', 'mujoco', 'libero.libero.envs') if m in sys.modules])")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.splitlines() == ["90 ('train', 'test') 90", "[]"]


@pytest.mark.slow
@pytest.mark.parametrize("suite", [suite for suite in SUITE_SIZES if suite != "Spatial"])
def test_check_env_passes_on_every_other_suite(suite):
    """gymnasium's checker on each suite id but Spatial (test_contract's), narrowed to one task so that its
    resets do not rebuild a simulator per drawn task."""
    env_id = libero_env_id(suite)
    task = family_of(env_id).tasks(env_id)[-1]
    env = gym.make(env_id, image_size=32, tasks=[task])
    check_env(env.unwrapped, skip_render_check=True)
    check_env(env, skip_render_check=True)
    observation, info = env.reset(options={"episode_id": 0, "split": "test"})
    assert env.observation_space.contains(observation)
    assert observation["wrist_images"].shape == observation["main_images"].shape == (32, 32, 3)
    assert observation["states"].shape == (8,) and env.action_space.shape == (7,)
    assert env.unwrapped.horizon == LIBERO_SUITES[suite].horizon
    env.close()


@pytest.mark.slow
def test_test_split_is_libero_evaluation_protocol():
    """Episode k plays task k // 50 from its fixed initial state k % 50, exactly (before settling)."""
    env = gym.make(SPATIAL, image_size=32, settle_steps=0)
    tasks = suite_tasks(LIBERO_SUITES["Spatial"].name)
    assert INIT_STATES_PER_TASK == 50 and all(len(task.init_states) == 50 for task in tasks)
    for episode_id in (0, 137, 499):
        _, info = env.reset(options={"episode_id": episode_id, "split": "test"})
        task = tasks[episode_id // 50]
        assert (info["task"], info["init_state"]) == (task.name, episode_id % 50)
        np.testing.assert_array_equal(env.unwrapped.simulator.get_sim_state(), task.init_states[episode_id % 50])
    _, info = env.reset(options={"episode_id": 7, "split": "test", "task": tasks[4].name})
    assert (info["task"], info["init_state"]) == (tasks[4].name, 7)
    env.close()


@pytest.mark.slow
def test_same_episode_id_gives_the_same_first_observation():
    """After other episodes (another task's simulator included), an episode id starts as it did."""
    env = gym.make(SPATIAL, image_size=32)
    for split in ("test", "train"):
        first, info = env.reset(seed=1, options={"episode_id": 3, "split": split})
        env.reset(seed=2, options={"episode_id": 260, "split": split})
        env.reset(seed=3, options={"episode_id": 4, "split": split, "task": info["task"]})
        again, _ = env.reset(seed=4, options={"episode_id": 3, "split": split})
        for key in ("main_images", "wrist_images", "states"):
            np.testing.assert_array_equal(first[key], again[key])
        assert first["task_description"] == again["task_description"]
    env.close()


@pytest.mark.slow
def test_train_episodes_shift_objects_off_the_test_states():
    """A train episode starts from one of LIBERO's states with every movable object moved a little
    in x and y, and the robot and fixtures where LIBERO put them."""
    shift = 0.01
    env = gym.make(
        SPATIAL, image_size=32, settle_steps=0, train_shift=shift, tasks=[family_of(SPATIAL).tasks(SPATIAL)[0]]
    )
    task = suite_tasks(LIBERO_SUITES["Spatial"].name)[0]
    for episode_id in range(3):
        _, info = env.reset(options={"episode_id": episode_id, "split": "train"})
        sim = env.unwrapped.simulator.sim
        start = task.init_states[info["init_state"]]
        qpos = np.asarray(sim.data.qpos)
        moved = np.flatnonzero(qpos != start[1:1 + qpos.size])
        free = [int(sim.model.jnt_qposadr[joint]) for joint in range(sim.model.njnt) if sim.model.jnt_type[joint] == 0]
        assert len(free) >= 3 and set(moved) == {address + axis for address in free for axis in (0, 1)}
        assert np.abs(qpos - start[1:1 + qpos.size]).max() <= shift
    env.close()


def camera_pixel(sim, camera, point, height, width):
    """Pixel (row, col) of a world point in the camera's true view (x right, y up, looking along -z)."""
    camera_id = sim.model.camera_name2id(camera)
    local = sim.data.cam_xmat[camera_id].reshape(3, 3).T @ (np.asarray(point) - sim.data.cam_xpos[camera_id])
    focal = (height / 2) / np.tan(np.deg2rad(sim.model.cam_fovy[camera_id]) / 2)
    return int(height / 2 - focal * local[1] / -local[2]), int(width / 2 + focal * local[0] / -local[2])


@pytest.mark.slow
def test_images_are_upright_and_rotated_as_libero_datasets():
    """The plate shows where the camera model puts it, upright and mirrored left-right (the 180-degree
    rotation of MuJoCo's bottom-row-first frame that openpi applies); the wrist frame is rotated alike;
    frames rendered without the geoms out of view equal full ones."""
    size = 64
    env = gym.make(SPATIAL, image_size=size, tasks=[family_of(SPATIAL).tasks(SPATIAL)[0]])
    observation, _ = env.reset(options={"episode_id": 0, "split": "test"})
    sim = env.unwrapped.simulator.sim
    camera_id = sim.model.camera_name2id("agentview")
    assert sim.data.cam_xmat[camera_id].reshape(3, 3)[2, 1] > 0  # the camera is not rolled: its up is the world's up
    segmentation = sim.render(size, size, camera_name="agentview", segmentation=True)[::-1, ::-1]
    plate = sim.data.body_xpos[sim.model.body_name2id("plate_1_main")]
    row, col = camera_pixel(sim, "agentview", plate, size, size)
    geom = segmentation[row, size - 1 - col, 1]
    assert sim.model.body_id2name(sim.model.geom_bodyid[geom]).startswith("plate_1")
    # Every frame leaves out the geoms outside its camera's view (the wrist camera's arm and pedestal)
    # and equals the full render.
    wrist = sim.model.camera_name2id("robot0_eye_in_hand")
    assert len(geoms_outside_view(sim.model._model, sim.data._data, wrist, size, size)) > 20
    for action in np.random.default_rng(0).uniform(-1, 1, (3, 7)).astype(np.float32):
        np.testing.assert_array_equal(
            observation["main_images"], sim.render(size, size, camera_name="agentview")[::-1, ::-1]
        )
        np.testing.assert_array_equal(
            observation["wrist_images"], sim.render(size, size, camera_name="robot0_eye_in_hand")[::-1, ::-1]
        )
        observation, *_ = env.step(action)
    env.close()


def test_without_the_wrist_camera_the_main_images_stay_and_no_hand_frame_is_rendered(monkeypatch):
    """``wrist_camera=False``, for a policy that reads only ``main_images``: the same main frames and states,
    no ``wrist_images`` in observations or space, and no render of the eye-in-hand camera."""
    import vlarl_envs.libero.env as libero_env

    task = [family_of(SPATIAL).tasks(SPATIAL)[0]]
    both, main_only = (gym.make(SPATIAL, image_size=32, tasks=task, wrist_camera=wrist) for wrist in (True, False))
    assert "wrist_images" in both.observation_space.spaces
    assert "wrist_images" not in main_only.observation_space.spaces
    actions = np.random.default_rng(1).uniform(-1, 1, (2, 7)).astype(np.float32)
    expected = [both.reset(options={"episode_id": 2, "split": "test"})[0]]
    expected += [both.step(action)[0] for action in actions]
    rendered = []
    real_render = libero_env.render_camera
    monkeypatch.setattr(libero_env, "render_camera", lambda sim, camera, *size: rendered.append(camera)
                        or real_render(sim, camera, *size))
    observations = [main_only.reset(options={"episode_id": 2, "split": "test"})[0]]
    observations += [main_only.step(action)[0] for action in actions]
    for observation, full in zip(observations, expected):
        assert observation.keys() == full.keys() - {"wrist_images"}
        np.testing.assert_array_equal(observation["main_images"], full["main_images"])
        np.testing.assert_array_equal(observation["states"], full["states"])
    assert rendered and set(rendered) == {"agentview"}
    both.close()
    main_only.close()


@pytest.mark.slow
def test_success_is_libero_predicate_and_ends_the_episode():
    """Setting the bowl on the plate satisfies the task's bddl goal: success, reward 1, terminated."""
    env = gym.make(SPATIAL, obs_mode="state", tasks=[family_of(SPATIAL).tasks(SPATIAL)[0]])
    env.reset(options={"episode_id": 0, "split": "test"})
    simulator = env.unwrapped.simulator
    _, reward, terminated, _, info = env.step(np.zeros(7, np.float32))
    assert not info["success"] and not simulator.check_success() and reward == 0.0 and not terminated
    sim = simulator.sim
    bowl = int(sim.model.jnt_qposadr[sim.model.joint_name2id("akita_black_bowl_1_joint0")])
    plate = sim.data.body_xpos[sim.model.body_name2id("plate_1_main")]
    sim.data.qpos[bowl:bowl + 3] = plate + [0.0, 0.0, 0.03]
    sim.forward()
    for _ in range(30):
        _, reward, terminated, truncated, info = env.step(np.array([0, 0, 0, 0, 0, 0, -1], np.float32))
        assert info["success"] == simulator.check_success()
        if terminated or truncated:
            break
    assert info["success"] and terminated and reward == 1.0
    assert info["episode"]["success_once"]
    env.close()


@pytest.mark.slow
def test_chunk_renders_only_its_last_observation_and_matches_single_steps(monkeypatch):
    """A chunk of 3 renders the two cameras once, not 3 times, and ends where 3 single steps end."""
    import vlarl_envs.libero.env as libero_env

    task = family_of(SPATIAL).tasks(SPATIAL)[0]
    chunked = gym.make(SPATIAL, image_size=32, action_chunk=3, tasks=[task])
    single = gym.make(SPATIAL, image_size=32, tasks=[task])
    renders = []
    render = libero_env.render_camera
    monkeypatch.setattr(libero_env, "render_camera", lambda *args: renders.append(args[1]) or render(*args))
    actions = np.random.default_rng(0).uniform(-1, 1, (2, 3, 7)).astype(np.float32)
    chunked.reset(options={"episode_id": 5})
    single.reset(options={"episode_id": 5})
    for chunk in actions:
        renders.clear()
        observation, *_ = chunked.step(chunk)
        assert sorted(renders) == ["agentview", "robot0_eye_in_hand"]
        expected = [single.step(action) for action in chunk][-1][0]
        for key in ("main_images", "wrist_images", "states"):
            np.testing.assert_array_equal(observation[key], expected[key])
    chunked.close()
    single.close()


@pytest.mark.slow
def test_a_simulator_rebuilt_beside_other_envs_renders_as_a_fresh_one():
    """Envs of one process that rebuild their simulators (another split's task, then training's) keep
    rendering their own scenes: closing a simulator frees only its own GL objects."""
    family = family_of(SPATIAL)
    tasks = family.tasks(SPATIAL)[:2]
    envs = family.make_episode_envs(SPATIAL, 2, image_size=32, action_chunk=5)
    envs.reset([{"episode_id": 0, "split": "task", "task": task} for task in tasks])
    envs.reset([{"episode_id": 5, "split": "train", "task": task} for task in tasks])
    fresh = gym.make(SPATIAL, image_size=32, action_chunk=5)
    fresh.reset(options={"episode_id": 5, "split": "train", "task": tasks[0]})
    for chunk in np.random.default_rng(0).uniform(-1, 1, (3, 5, 7)).astype(np.float32):
        batch, *_ = envs.step(np.stack([chunk, chunk]))
        expected, *_ = fresh.step(chunk)
        for key in ("main_images", "wrist_images", "states"):
            np.testing.assert_array_equal(batch[key][0], expected[key])
    envs.close()
    fresh.close()


@pytest.mark.slow
def test_vector_env_steps_subprocesses():
    family = family_of(SPATIAL)
    assert not family.batched
    vector = family.make_vec(SPATIAL, 2, image_size=32, tasks=[family.tasks(SPATIAL)[0]])
    observations, _ = vector.reset(seed=0)
    assert observations["main_images"].shape == (2, 32, 32, 3) and observations["states"].shape == (2, 8)
    observations, rewards, *_ = vector.step(np.zeros((2, 7), np.float32))
    assert rewards.shape == (2,) and len(observations["task_description"]) == 2
    vector.close()


def body_positions(env):
    """World position of every object and fixture (the bodies bddl names ``<name>_main``)."""
    sim = env.unwrapped.simulator.sim
    names = (sim.model.body_id2name(body) for body in range(sim.model.nbody))
    return {
        name: np.array(sim.data.body_xpos[sim.model.body_name2id(name)]) for name in names if name.endswith("_main")
    }


@pytest.mark.slow
def test_ood_splits_play_libero_pro_perturbation_suites():
    """Each OOD split plays its LIBERO-Pro suite's task k // 50 from that suite's state k % 50 with
    the suite's instruction, and differs from ``test`` in what it perturbs and nothing else."""
    task = family_of(SPATIAL).tasks(SPATIAL)[0]
    env = gym.make(SPATIAL, image_size=32, settle_steps=0, tasks=[task])
    episode_id = 3
    starts = {}
    for split in ("test", "language", "position", "object", "task"):
        observation, info = env.reset(options={"episode_id": episode_id, "split": split})
        suite = LIBERO_SUITES["Spatial"].name
        expected = suite_tasks(suite)[0] if split == "test" else perturbation_tasks(suite, split)[0]
        assert (info["split"], info["task"], info["init_state"]) == (split, task, episode_id)
        assert expected.name == task and observation["task_description"] == expected.language
        np.testing.assert_array_equal(env.unwrapped.simulator.get_sim_state(), expected.init_states[episode_id])
        starts[split] = (observation["task_description"], body_positions(env))
    test_language, test_bodies = starts["test"]
    assert test_language == "pick up the black bowl between the plate and the ramekin and place it on the plate"
    for split in ("language", "task"):
        language, bodies = starts[split]
        assert language != test_language and bodies.keys() == test_bodies.keys()
        # LIBERO-Pro samples each suite's 50 states anew from the same placement regions
        assert max(np.abs(bodies[name] - test_bodies[name]).max() for name in bodies) < 0.07
    assert "not between" in starts["task"][0]
    language, bodies = starts["position"]
    assert language == test_language and bodies.keys() == test_bodies.keys()
    plate_moved = bodies["plate_1_main"][:2] - test_bodies["plate_1_main"][:2]
    assert np.linalg.norm(plate_moved) > 0.15  # the plate and the cookie box trade places
    language, bodies = starts["object"]
    assert language == test_language
    assert {"black_bowl_1_main", "yellow_plate_1_main"} <= bodies.keys()
    assert not {"akita_black_bowl_1_main", "plate_1_main"} & bodies.keys()
    env.close()


@pytest.mark.slow
def test_check_env_passes_on_an_ood_split_and_unavailable_splits_error():
    env = gym.make(SPATIAL, image_size=32, split="position", tasks=[family_of(SPATIAL).tasks(SPATIAL)[1]])
    check_env(env.unwrapped, skip_render_check=True)
    check_env(env, skip_render_check=True)
    _, info = env.reset(options={"episode_id": 60})
    assert info["split"] == "position" and info["init_state"] == 10
    with pytest.raises(ValueError, match=r"unknown split 'lighting'.*'language', 'position', 'object', 'task'"):
        env.reset(options={"split": "lighting"})
    env.close()
    long_horizon = gym.make(libero_env_id("90"), obs_mode="state")
    with pytest.raises(ValueError, match=r"split 'language' needs LIBERO-Pro's _lan suite.*\['train', 'test'\]"):
        long_horizon.reset(options={"split": "language"})
    with pytest.raises(ValueError, match=r"split 'object' needs"):
        gym.make(libero_env_id("90"), split="object")
    long_horizon.close()
