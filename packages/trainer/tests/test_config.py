"""Recipes load and every config problem is caught before Ray starts, with a clear message."""

import json

import pytest

from vlarl_trainer.config import available_recipes, load_config
from vlarl_trainer.rl.eval_env import check_calvin_chains, check_eval_splits
from vlarl_trainer.rl.validation import sampling_overrides, validate

CPU_RECIPES = ["metaworld_10_ppo_openpi_tiny", "metaworld_10_ppo_openpi_tiny_flownoise",
               "metaworld_10_grpo_openpi_tiny", "metaworld_10_ppo_openvlaoft_tiny", "metaworld_10_grpo_openvlaoft_tiny",
               "metaworld_45_ppo_openpi_tiny", "metaworld_50_ppo_openpi_tiny", "metaworld_50_ppo_openpi_pi05_tiny"]
MANISKILL_CPU_RECIPES = ["maniskill_ppo_openvla_tiny", "maniskill_grpo_openvla_tiny", "maniskill_ppo_openvlaoft_tiny",
                         "maniskill_grpo_openvlaoft_tiny", "maniskill_ppo_openpi_tiny"]
PUBLISHED_SIZE_RECIPES = ["metaworld_50_ppo_openpi", "libero_10_ppo_openpi", "gsenv_ppo_openpi_pi05",
                          "maniskill_ppo_openvla", "maniskill_grpo_openvla", "maniskill_ppo_openvlaoft",
                          "maniskill_grpo_openvlaoft", "metaworld_50_grpo_openvlaoft", "metaworld_45_ppo_openpi",
                          "metaworld_50_ppo_openpi_pi05", "maniskill_ppo_openpi", "maniskill_ppo_openpi_pi05"]


def test_seed_recipes_ship():
    assert set(CPU_RECIPES) | set(MANISKILL_CPU_RECIPES) | set(PUBLISHED_SIZE_RECIPES) <= set(available_recipes())


@pytest.mark.parametrize("recipe", [name for name in available_recipes() if "_tiny" in name])
def test_tiny_recipes_update_in_fp32_without_recomputation(recipe):
    """A tiny recipe trains on a CPU, where bf16 and gradient checkpointing only slow the update, also when
    it inherits a published-size recipe that sets them for GPUs."""
    actor = load_config([f"recipe={recipe}"]).actor
    assert (actor.precision, actor.gradient_checkpointing) == ("fp32", False)


@pytest.mark.parametrize("recipe", CPU_RECIPES)
def test_cpu_recipes_validate(recipe):
    config = load_config([f"recipe={recipe}"])
    layout = validate(config)
    assert layout.action_dim == 4 and layout.state_dim == 4
    assert layout.chunk_steps == config.env.max_steps // config.env.action_chunk


@pytest.mark.sim
@pytest.mark.parametrize("recipe", MANISKILL_CPU_RECIPES)
def test_maniskill_cpu_recipes_validate(recipe):
    from vlarl_envs.testing import require_simulator

    require_simulator("mani_skill")
    config = load_config([f"recipe={recipe}"])
    layout = validate(config)
    assert (layout.action_dim, layout.state_dim) == (7, 8) and config.policy.preset == "tiny"
    assert layout.chunk_steps == config.env.max_steps // config.env.action_chunk


@pytest.mark.sim
def test_gsenv_cpu_recipe_is_the_published_ones_twin():
    """Tiny pi0.5 with its value head after the VLM, like gsenv_ppo_openpi_pi05, on 64 px splats and the
    success-only reward."""
    from vlarl_envs.testing import require_simulator

    require_simulator("mani_skill")
    config = load_config(["recipe=gsenv_ppo_openpi_pi05_tiny"])
    published = load_config(["recipe=gsenv_ppo_openpi_pi05", "policy.pretrained=/nowhere"])
    layout = validate(config)
    assert (layout.action_dim, layout.state_dim) == (7, 8) and config.env.id == published.env.id
    assert (config.policy.name, config.policy.preset) == ("pi05", "tiny")
    assert config.policy.kwargs["value_after_vlm"] is published.policy.kwargs["value_after_vlm"] is True
    assert (config.env.kwargs["image_size"], config.env.kwargs["reward_mode"]) == (64, "sparse")


@pytest.mark.parametrize("recipe", ["maniskill_ppo_openvlaoft", "maniskill_grpo_openvlaoft",
                                    "metaworld_50_grpo_openvlaoft"])
def test_published_openvla_recipes_make_their_policy_config(recipe):
    from vlarl_policies.registry import preset_config

    config = load_config([f"recipe={recipe}"])
    _, policy = preset_config(config.policy.name, config.policy.preset,
                              **{**config.policy.kwargs, "action_chunk": config.env.action_chunk})
    assert policy.lora_rank == 32 and policy.llm_depth == 32 and config.algorithm.logprob_level == "token"
    assert (policy.action_chunk, config.algorithm.clip_high) == (config.env.action_chunk, 0.28)


@pytest.mark.sim
@pytest.mark.parametrize("recipe, policy, logprob_level", [("maniskill_ppo_openpi", "pi0", "token"),
                                                           ("maniskill_ppo_openpi_pi05", "pi05", "chunk")])
def test_rlinfs_maniskill_openpi_recipes_sample_with_flow_noise_and_score_every_split(recipe, policy, logprob_level):
    """RLinf's pi0 and pi0.5 ManiSkill recipes: flow-noise with the joint log-probability, one global batch of
    320 envs x 16 chunks, scored in distribution and on the vision, semantic and execution splits."""
    from vlarl_envs.testing import require_simulator
    from vlarl_policies.registry import preset_config

    require_simulator("mani_skill")
    config = load_config([f"recipe={recipe}", "policy.pretrained=/nowhere"])
    layout = validate(config)
    _, made = preset_config(config.policy.name, config.policy.preset,
                            **{**config.policy.kwargs, "action_chunk": config.env.action_chunk})
    assert config.policy.name == policy and (made.noise_method, made.joint_logprob) == ("flow_noise", True)
    assert config.algorithm.logprob_level == logprob_level and config.algorithm.entropy_coef == 0.005
    assert config.env.num_envs * layout.chunk_steps == config.actor.global_batch_size == 5120
    assert config.eval.splits == ["train", "vision", "semantic", "execution"]


@pytest.mark.parametrize("recipe, tasks, scored_on", [
    ("metaworld_45_ppo_openpi", 45, "vlarl/MetaWorld-ML45-test-v3"),
    ("metaworld_45_ppo_openpi_tiny", 45, "vlarl/MetaWorld-ML45-test-v3"),
    ("metaworld_50_ppo_openpi", 50, None),
    ("metaworld_50_ppo_openpi_pi05", 50, None),
    ("metaworld_50_ppo_openpi_tiny", 50, None),
])
def test_metaworld_suite_recipes_give_each_env_one_task(recipe, tasks, scored_on):
    """An env count that is a multiple of the suite's tasks keeps one simulator per env
    (rl.training_episodes.training_options); ML45 trains on its 45 tasks and scores on the 5 held out."""
    from vlarl_policies.registry import preset_config

    config = load_config([f"recipe={recipe}", "policy.pretrained=/nowhere"])
    layout = validate(config)
    assert config.env.num_envs % tasks == 0 and layout.action_dim == 4
    assert config.eval.env_id == scored_on
    preset_config(config.policy.name, config.policy.preset, **{**config.policy.kwargs, "action_chunk": 5})


@pytest.mark.sim
@pytest.mark.parametrize("recipe", ["libero_spatial_ppo_openpi", "libero_spatial_ppo_openpi_quickstart",
                                    "libero_10_ppo_openpi", "libero_10_grpo_openpi", "libero_10_ppo_openpi_pi05",
                                    "libero_10_grpo_openpi_pi05"])
def test_rlinfs_libero_recipes_validate(recipe):
    from vlarl_envs.testing import require_simulator
    from vlarl_policies.registry import preset_config

    require_simulator("libero")
    config = load_config([f"recipe={recipe}", "policy.pretrained=/nowhere"])
    layout = validate(config)
    assert (layout.action_dim, layout.state_dim) == (7, 8) and config.policy.preset == "base"
    if recipe.endswith("quickstart"):  # RLinf's minimum case offloads the actor and the rollout
        assert config.actor.offload and config.rollout.offload
    preset_config(config.policy.name, config.policy.preset,
                  **{**config.policy.kwargs, "action_chunk": config.env.action_chunk})


@pytest.mark.sim
@pytest.mark.parametrize("recipe", ["libero_spatial_ppo_openpi_tiny", "libero_spatial_grpo_openpi_tiny"])
def test_libero_cpu_recipes_validate_with_the_front_camera_and_40_episodes_a_step(recipe):
    """The tiny policies read the front camera alone, so the recipes render no eye-in-hand frame; a policy
    that reads it is refused there, naming the setting."""
    from vlarl_envs.testing import require_simulator

    require_simulator("libero")
    config = load_config([f"recipe={recipe}"])
    layout = validate(config)
    assert (layout.action_dim, layout.state_dim) == (7, 8) and config.policy.preset == "tiny"
    assert "main_images" in layout.observation_space.spaces
    assert "wrist_images" not in layout.observation_space.spaces
    with pytest.raises(ValueError, match=r"reads \['main_images', 'wrist_images'\], but env.kwargs.wrist_camera=false "
                                         r".*: set env.kwargs.wrist_camera=true"):
        validate(load_config([f"recipe={recipe}", "policy.kwargs.camera_keys=[main_images, wrist_images]"]))
    both = validate(load_config([f"recipe={recipe}", "policy.kwargs.camera_keys=[main_images, wrist_images]",
                                 "env.kwargs.wrist_camera=true"]))
    assert "wrist_images" in both.observation_space.spaces
    assert config.env.num_envs * config.rollout.rollout_epoch == 40
    assert layout.env_workers == 2 and layout.chunk_steps == config.env.max_steps // config.env.action_chunk
    if config.algorithm.name == "ppo":  # one env per task: each builds its simulator once
        assert config.env.num_envs == 10
    else:
        assert config.env.num_envs % config.algorithm.group_size == 0


@pytest.mark.sim
@pytest.mark.parametrize("recipe", ["calvin_abc_d_ppo_openpi_tiny", "calvin_abc_d_grpo_openpi_tiny",
                                    "calvin_abc_d_ppo_openpi", "calvin_abc_d_ppo_openpi_pi05"])
def test_calvin_recipes_train_on_abc_and_score_on_d(recipe):
    from vlarl_envs import family_of
    from vlarl_envs.testing import require_simulator
    from vlarl_policies.registry import preset_config
    from vlarl_trainer.rl.training_episodes import training_options

    require_simulator("calvin_env")
    config = load_config([f"recipe={recipe}", "policy.pretrained=/nowhere"])
    layout = validate(config)
    assert (layout.action_dim, layout.state_dim) == (7, 15)
    assert (config.env.id, config.eval.env_id) == ("vlarl/CALVIN-ABC-v0", "vlarl/CALVIN-D-v0")
    preset_config(config.policy.name, config.policy.preset,
                  **{**config.policy.kwargs, "action_chunk": config.env.action_chunk})
    tasks = family_of(config.env.id).tasks(config.env.id)
    if config.policy.preset == "tiny" and config.algorithm.name == "ppo":  # every env keeps one task
        assert config.env.num_envs % len(tasks) == 0
    elif config.policy.preset == "tiny":  # a step plays every task once, in one group on one start state
        for step in range(3):
            played = [(option["task"], option["episode_id"]) for epoch in range(config.rollout.rollout_epoch)
                      for option in training_options(config, step, epoch)]
            assert sorted(task for task, _ in set(played)) == sorted(tasks)
            assert all(played.count(group) == config.algorithm.group_size for group in set(played))
    else:
        assert config.eval.calvin_chains == 1000


def test_variant_recipe_inherits_and_overrides():
    config = load_config(["recipe=metaworld_10_ppo_openpi_tiny_flownoise", "actor.lr=3e-5"])
    assert config.policy.kwargs["noise_method"] == "flow_noise"
    assert config.env.id == "vlarl/MetaWorld-MT10-v3" and config.actor.lr == 3e-5
    assert config.recipe == "metaworld_10_ppo_openpi_tiny_flownoise"


def test_oft_grpo_variant_samples_and_learns_as_its_ppo_recipe():
    ppo = load_config(["recipe=metaworld_10_ppo_openvlaoft_tiny"])
    grpo = load_config(["recipe=metaworld_10_grpo_openvlaoft_tiny"])
    assert grpo.actor.lr == ppo.actor.lr == 3e-4
    assert grpo.policy.kwargs["temperature"] == ppo.policy.kwargs["temperature"] == 1.75
    assert not grpo.policy.kwargs["add_value_head"] and ppo.policy.kwargs["add_value_head"]


def test_missing_env_family_says_so():
    config = load_config(["recipe=metaworld_10_ppo_openpi_tiny", "env.id=vlarl/CALVIN-ABC-D-v0"])
    with pytest.raises(ValueError, match="'vlarl/CALVIN-ABC-D-v0' is not available in this vlarl version"):
        validate(config)


def test_missing_policy_says_so():
    config = load_config(["recipe=metaworld_10_ppo_openpi_tiny", "policy.name=octo"])
    with pytest.raises(ValueError, match=r"policy.name 'octo' is not available .*available: \['openvla', "
                                         r"'openvla_oft', 'pi0', 'pi05'\]"):
        validate(config)


def test_settings_of_another_policy_are_refused_before_ray():
    config = load_config(["recipe=metaworld_10_ppo_openvlaoft_tiny", "policy.kwargs.noise_level=0.5"])
    with pytest.raises(ValueError, match=r"policy.kwargs=.* does not make a 'openvla_oft' policy: unknown "
                                         r"OpenVLAOFTConfig field\(s\) \['noise_level'\]"):
        validate(config)


def saved_policy(directory, **settings):
    """A directory holding just the config.json of a saved policy (what validation reads)."""
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(settings))
    return directory


def test_checkpoint_saved_with_the_recipes_settings_passes(tmp_path):
    config = load_config(["recipe=metaworld_10_ppo_openpi_tiny"])
    saved = saved_policy(tmp_path / "sft", type="pi0", **config.policy.kwargs, action_chunk=config.env.action_chunk,
                         noise_logvar_range=[0.08, 0.16])
    validate(load_config(["recipe=metaworld_10_ppo_openpi_tiny", f"policy.pretrained={saved}"]))


def test_checkpoint_saved_with_other_settings_is_named(tmp_path):
    saved = saved_policy(tmp_path / "sft", type="pi0", noise_method="flow_noise", noise_level=0.5, add_value_head=True,
                         action_chunk=4)
    config = load_config(["recipe=metaworld_10_ppo_openpi_tiny", f"policy.pretrained={saved}"])
    with pytest.raises(ValueError, match=r"\(action_chunk: asked 5, saved 4, noise_method: asked 'flow_sde', "
                                         r"saved 'flow_noise'\)"):
        validate(config)


def test_sampling_settings_may_differ_from_the_checkpoints(tmp_path):
    saved = saved_policy(tmp_path / "sft", type="pi0", noise_method="flow_sde", noise_level=0.5, add_value_head=True,
                         action_chunk=5)
    config = load_config(["recipe=metaworld_10_ppo_openpi_tiny", f"policy.pretrained={saved}"])
    validate(config)
    assert sampling_overrides(config) == {"noise_level": 1.0}


def test_mandatory_checkpoint_is_named():
    config_error = pytest.raises(ValueError, match="policy.pretrained")
    with config_error:
        validate(load_config(["recipe=metaworld_50_ppo_openpi"]))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["recipe=nope"], "unknown recipe 'nope'"),
        ([], "name a recipe"),
        (["recipe=metaworld_10_ppo_openpi_tiny", "actor.lrr=1"], "lrr"),
        (["recipe=metaworld_10_ppo_openpi_tiny", "actor.lr=fast"], "actor.lr"),
    ],
)
def test_bad_overrides(overrides, message):
    with pytest.raises(ValueError, match=message):
        load_config(overrides)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["env.max_steps=101"], "multiple of env.action_chunk"),
        (["env.num_envs=9", "rollout.pipeline_stage_num=2"], "must divide into env workers"),
        (["actor.global_batch_size=700"], "multiple of actor.global_batch_size"),
        (["actor.micro_batch_size=70"], "multiple of micro_batch_size"),
        (["algorithm.name=a2c"], "algorithm.name"),
        (["algorithm.reward_scale=0"], "algorithm.reward_scale must be > 0, got 0"),
        (["algorithm.target_kl=0"], "algorithm.target_kl must be None or > 0, got 0"),
        (["eval.sampling=greedy"], r"eval.sampling must be one of \('deterministic', .*\), got 'greedy'"),
        (["eval.also_sampling=[sample, mode]"], r"eval.also_sampling: every mode must be one of .*, got \['mode'\]"),
        (["eval.also_sampling=[deterministic]"], "eval.also_sampling repeats eval.sampling"),
        (["eval.first_episode_id=-1"], r"eval.first_episode_id must be an episode id \(>= 0\), got -1"),
        (["algorithm.name=grpo", "algorithm.group_size=7"], "multiple of algorithm.group_size"),
        (["algorithm.name=grpo", "algorithm.normalize_per_task=true"], "needs algorithm.name=ppo .* got name='grpo'"),
        (["algorithm.normalize_advantages=false", "algorithm.normalize_per_task=true"],
         "normalize_advantages=true, got .* normalize_advantages=False"),
        (["algorithm.name=grpo", "algorithm.skip_unsolved_tasks=true"], "needs algorithm.name=ppo, got 'grpo'"),
        (["runner.torch_threads=0"], "runner.torch_threads must be >= 1, got 0"),
        (["actor.offload=true", "cluster.component_placement={env: 0, rollout: 0, actor: 0-1}"],
         "actor.offload with actor.strategy=ddp .* got ddp on 2 ranks"),
        (["rollout.video_interval=-1"], "rollout.video_interval must be >= 0 .* got -1"),
        (["actor.torch_threads=0"], r"actor.torch_threads must be >= 1 or null \(runner.torch_threads\), got 0"),
        (["cluster.component_placement={critic: 1}"], "unknown component 'critic'"),
        (["cluster.component_placement={env: '0-1', rollout: '0-2', actor: 0}"], "multiple of rollout workers"),
        (["env.id=vlarl/MetaWorld-fly-v3"], "not available"),
    ],
)
def test_validation_errors(overrides, message):
    config = load_config(["recipe=metaworld_10_ppo_openpi_tiny", *overrides])
    with pytest.raises(ValueError, match=message):
        validate(config)


def test_actor_threads_default_to_the_runners():
    from vlarl_trainer.rl.runner import actor_threads

    recipe = "recipe=metaworld_10_ppo_openpi_tiny"
    assert actor_threads(load_config([recipe, "runner.torch_threads=3", "actor.torch_threads=null"])) == 3
    assert actor_threads(load_config([recipe, "runner.torch_threads=3", "actor.torch_threads=1"])) == 1


@pytest.mark.parametrize("recipe", sorted(available_recipes()))
def test_every_recipe_names_itself_and_its_policy_size(recipe):
    """``_tiny`` in a recipe's name, and only there, means the CPU preset; the others are the published sizes."""
    config = load_config([f"recipe={recipe}"])
    assert config.recipe == recipe
    assert config.policy.preset == ("tiny" if "_tiny" in recipe else "base")


@pytest.mark.parametrize("recipe", sorted(available_recipes()))
def test_every_recipe_scores_splits_and_chains_its_evaluation_env_has(recipe):
    """Checked without building an env: a published recipe that names a split its env lacks fails only when
    its first evaluation starts, on hardware no test here reaches."""
    config = load_config([f"recipe={recipe}"])
    check_eval_splits(config)
    check_calvin_chains(config)


def test_every_command_prints_one_tree_and_lists_the_recipes(capsys):
    import yaml

    from vlarl_trainer.cli.commands import collect_main, eval_main, main_job_main, sft_main, train_main

    for main in (collect_main, sft_main, train_main, eval_main, main_job_main):
        assert main(["recipe=metaworld_10_ppo_openpi_tiny", "job=full", "actor.lr=3e-5", "--cfg", "job"]) == 0
        tree = yaml.safe_load(capsys.readouterr().out)
        assert set(tree) == {"recipe", "dataset", "resume", "env", "policy", "algorithm", "rollout", "actor", "cluster",
                             "eval", "runner", "collect", "sft", "job"}
        assert (tree["recipe"], tree["job"]["size"], tree["actor"]["lr"]) == (
            "metaworld_10_ppo_openpi_tiny", "full", 3e-5)
        assert tree["collect"]["task_episodes"] == {"reach-v3": 5, "push-v3": 5, "pick-place-v3": 5}
        assert (tree["algorithm"]["skip_no_signal"], tree["algorithm"]["target_kl"], tree["eval"]["sampling"]) == (
            True, None, "deterministic")
    assert train_main(["--help"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("vlarl-train [recipe=<name>]")
    assert "recipe: " in text and "metaworld_10_ppo_openpi_tiny" in text
    assert "job: calvin_abc_d, demo, full, gsenv, libero_spatial, ml45, mt10, mt10_demo, mt50, put_on_plate" in text
    assert "policy: openvla, openvla_oft, openvla_oft_tiny, openvla_tiny, pi0, pi05, pi05_tiny, pi0_tiny" in text
    assert "algorithm: grpo, ppo" in text and "env: calvin_abc, calvin_abc_tiny," in text


def test_without_a_recipe_every_component_runs_once_on_device_zero():
    from vlarl_trainer.rl.placement import parse_component_placement

    placed = parse_component_placement(load_config([], need_recipe=False).cluster.component_placement)
    assert placed == {"env": [(0,)], "rollout": [(0,)], "actor": [(0,)]}
    spread = load_config(["recipe=maniskill_ppo_openvla"]).cluster.component_placement
    assert {component: len(processes) for component, processes in parse_component_placement(spread).items()} == {
        "env": 4, "rollout": 4, "actor": 8}


def test_the_run_starts_from_a_copy_that_samples_as_asked(tmp_path):
    import torch

    import vlarl_policies
    from vlarl_trainer.rl.runner import initial_policy

    sft = vlarl_policies.make("pi0", preset="tiny", action_dim=4, state_dim=4, action_chunk=5, noise_level=0.5)
    sft.save_pretrained(tmp_path / "sft")
    config = load_config(["recipe=metaworld_10_ppo_openpi_tiny", f"policy.pretrained={tmp_path / 'sft'}"])
    start = initial_policy(config, None, tmp_path / "run", [])
    assert start == str(tmp_path / "run" / "initial_policy")
    resampled = vlarl_policies.from_pretrained(start)
    assert resampled.config == sft.config.replace(noise_level=1.0)
    assert all(torch.equal(value, sft.state_dict()[key]) for key, value in resampled.state_dict().items())
    assert initial_policy(config, None, tmp_path / "run", []) == start
    same = load_config(["recipe=metaworld_10_ppo_openpi_tiny", f"policy.pretrained={start}"])
    assert initial_policy(same, None, tmp_path / "other", []) == start


@pytest.mark.parametrize("name", ["../escape", "nested/run", "/tmp/elsewhere", ".."])
def test_run_names_that_leave_the_output_dir_are_refused_before_anything_is_written(tmp_path, capsys, name):
    from vlarl_trainer.cli.commands import main_job_main, sft_main, train_main

    output_dir = tmp_path / "runs" / "out"
    for main in (train_main, sft_main, main_job_main):
        code = main(["recipe=metaworld_10_ppo_openpi_tiny", f"runner.output_dir={output_dir}", f"runner.name={name}"])
        message = capsys.readouterr().err.strip()
        assert code == 2 and "\n" not in message and "runner.name" in message and repr(name) in message
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == []


@pytest.mark.parametrize(("setting", "named"), [
    ("policy.pretrained=/nonexistent/sft", "policy.pretrained=/nonexistent/sft: expected a saved policy directory"),
    ("runner.logger=[mlflow]", "runner.logger: unknown backend(s) ['mlflow']"),
    ("eval.splits=[nosuch]", "eval.splits: vlarl/MetaWorld-MT10-v3 has no split(s) ['nosuch']"),
])
def test_settings_checkable_without_ray_stop_vlarl_train_before_ray_starts(tmp_path, capsys, monkeypatch, setting,
                                                                          named):
    from vlarl_trainer.cli.commands import train_main
    from vlarl_trainer.rl import runner

    def no_ray(*args, **kwargs):
        raise AssertionError("Ray was started")

    monkeypatch.setattr(runner, "start_ray", no_ray)
    code = train_main(["recipe=metaworld_10_ppo_openpi_tiny", f"runner.output_dir={tmp_path / 'runs'}", setting])
    message = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in message and named in message and "Ray was started" not in message
    assert not (tmp_path / "runs").exists()


def test_an_unreachable_cluster_address_ends_in_one_line_within_seconds(tmp_path, capsys):
    import socket
    import time

    from vlarl_trainer.cli.commands import train_main

    with socket.socket() as held:  # a port of this host that nothing listens on
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
    start = time.monotonic()
    code = train_main(["recipe=metaworld_10_ppo_openpi_tiny", f"runner.output_dir={tmp_path / 'runs'}",
                       f"cluster.address=127.0.0.1:{port}"])
    message = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in message and time.monotonic() - start < 60
    assert f"cluster.address=127.0.0.1:{port}: no Ray cluster answers there" in message
    assert not (tmp_path / "runs").exists()
