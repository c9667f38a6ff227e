"""Other RL frameworks' protocols over the environment server (trajforge/envs/server.py) and
the Gym API: each module is a thin adapter over what exists, named after the framework.

- openenv.py: `trajforge serve` speaking OpenEnv's WebSocket contract (`/openenv/{env}/ws`),
  so OpenEnv's own `EnvClient` (GenericEnvClient, or a typed subclass) plays any served env.
- nemo_gym.py: `trajforge serve` as a NeMo Gym resources server (`/seed_session`, a `/step`
  tool, `/verify`, `/close_session`; an environment failure verifies as `mask_sample`).

Frameworks whose environments are classes in the trainer's process (SkyRL-Gym, GEM,
OpenRLHF's agent API) call the server from there: training/engines/skyrl_gym_env.py,
gem_env.py, openrlhf_agent.py. docs/rl-environments.md ("Other RL frameworks") says how
each is used and tested.
Nothing here imports Dagster, or the frameworks themselves: the server speaks their wire.
"""
