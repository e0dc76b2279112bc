"""The paper's experiment (Figure 2): assess -> judge -> refine -> aggregate, one module a step."""
