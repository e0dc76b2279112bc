"""python -m stages DESIGN STAGE: run one stage of one judge design (stages/runner.py)."""

from stages import outside_the_environment

try:
    from stages.runner import main
except ModuleNotFoundError as missing:
    outside_the_environment(missing)

if __name__ == "__main__":
    main()
