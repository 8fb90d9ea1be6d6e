"""The three worker roles. Plain classes: vlarl_trainer.cluster turns them into Ray actors."""
