"""Instructions for the wrapped ManiSkill3 tasks: a canonical sentence and three paraphrases each.

Written from each task's success condition and what the camera shows (colours included),
not from the task id; the paraphrases are held out for the ``semantic`` split.
"""

from vlarl_envs.instructions import InstructionSet

MANISKILL_INSTRUCTIONS = InstructionSet(
    {
        "PickCube": ("pick up the red cube and hold it at the green target", "lift the red cube to the green marker and keep still", "grab the cube and bring it up to the green ball", "raise the red block to the goal point and hold it there"),
        "PushCube": ("push the blue cube onto the target", "slide the cube forward onto the red and white target", "shove the blue block onto the goal circle", "move the cube onto the target by pushing it"),
        "PullCube": ("pull the blue cube back onto the target", "drag the cube toward the robot onto the goal circle", "slide the blue block backward onto the target", "pull the cube onto the red and white target"),
        "StackCube": ("stack the red cube on the green cube", "put the red block on top of the green block", "place the red cube onto the green one and let go", "pile the red cube on the green cube"),
        "PegInsertionSide": ("insert the peg into the hole in the box from the side", "push the orange end of the peg into the box's hole", "pick up the peg and slide it sideways into the hole", "put the peg into the box through the side hole"),
        "PlugCharger": ("plug the charger into the receptacle", "insert the charger's prongs into the wall socket", "push the charger plug into the outlet", "connect the charger to the receptacle"),
        "PushT": ("push the t-shaped block onto the t-shaped target", "slide the t block until it covers the red t outline", "align the t-shaped block with the target by pushing it", "move the t piece onto its goal by pushing"),
        "PokeCube": ("use the peg to push the red cube to the goal", "grab the peg and poke the cube onto the target", "pick up the stick and nudge the red cube to the goal", "push the cube to the target with the peg"),
        "LiftPegUpright": ("stand the lying peg upright on the table", "lift the peg and set it upright", "turn the peg so it stands on its end", "put the peg upright on the table"),
        "PlaceSphere": ("put the ball into the shallow bin", "place the sphere in the bin", "pick up the blue ball and drop it into the container", "move the sphere into the bin"),
        "RollBall": ("push the ball so it rolls into the goal region", "roll the blue ball to the far end of the table", "hit the ball so it rolls onto the target area", "send the ball rolling into the goal"),
        "PullCubeTool": ("use the l-shaped tool to pull the cube closer", "grab the hook and drag the blue cube toward the robot", "pick up the tool and pull the cube in with it", "hook the cube with the tool and pull it back"),
        "StackPyramid": ("stack the blue cube on top of the red and green cubes", "put the red cube next to the green one, then the blue cube on both", "build a pyramid of the three cubes with blue on top", "place red beside green and stack blue over them"),
    }
)
