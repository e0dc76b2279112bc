"""The AI Psychiatrist paper's assessor and judge: its prompts (verbatim), the assessment's XML
sections, the judge's 1-5 rubric in the paper's text protocol or schema-constrained (json)."""
