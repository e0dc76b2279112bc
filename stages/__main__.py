"""python -m stages DESIGN STAGE: run one stage of one judge design (stages/runner.py)."""

from stages.runner import main

if __name__ == "__main__":
    main()
