"""The three worker roles. Plain classes: vlarl_trainer.rl.cluster turns them into Ray actors."""
