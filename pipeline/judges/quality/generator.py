"""The generator: answer a RAG question from its retrieved passages; on a regeneration, with the
evaluator's issues and hint and the previous answer (seed 004, section 5)."""

from __future__ import annotations

from pipeline.data.rag_rows import RagRow
from pipeline.judges.quality.passages import passages_block
from pipeline.judges.quality.results import Answer, Calls, EvaluatedAnswer
from pipeline.judges.quality.settings import GenerateSettings
from pipeline.llm.latency import TimedCalls
from pipeline.llm.types import CallContext, ChatRequest, Message, Options

GENERATE_SYSTEM = """\
You answer questions about a software product using only the passages given with the question.
Answer in at most three sentences. If the passages do not contain the answer, say so."""

GENERATE_USER = """\
PASSAGES:
{passages}

QUESTION: {question}"""

# The seed's wording, with the issues listed beside the hint.
REGENERATE_INSTRUCTION = """\
IMPORTANT: Your previous answer was rated low quality.
Issues:
{issues}
Feedback: {hint}
Previous answer (do not repeat it): {previous}
Write an improved answer that addresses the feedback."""

PREVIOUS_CHARS = 500  # the seed's cut: the previous answer is shown, not the whole of it


def regeneration_instruction(previous: EvaluatedAnswer) -> str:
    evaluation = previous.evaluation
    issues = "\n".join(f"- {issue}" for issue in evaluation.issues) if evaluation else ""
    hint = evaluation.improvement_hint if evaluation else ""
    if evaluation is None:  # unscored, and regeneration on unscored was asked for
        issues, hint = "- the evaluator could not score it", "Answer the question from the passages."
    return REGENERATE_INSTRUCTION.format(
        issues=issues or "- (none listed)", hint=hint.strip(), previous=previous.answer.text[:PREVIOUS_CHARS]
    )


def generate(
    session: TimedCalls,
    row: RagRow,
    settings: GenerateSettings,
    options: Options,
    context: CallContext,
    *,
    attempt: int = 0,
    instruction: str | None = None,
) -> Answer:
    user = GENERATE_USER.format(passages=passages_block(row), question=row.question)
    if instruction is not None:
        user += "\n\n" + instruction
    request = ChatRequest(
        messages=(Message(role="system", content=GENERATE_SYSTEM), Message(role="user", content=user)),
        options=options.model_copy(update={"num_predict": settings.num_predict}),
    )
    reply = session.chat(request, context.at(role="generate")).record.reply
    keys, seconds = session.take()
    return Answer(
        item=row.id,
        attempt=attempt,
        text=reply.text.strip(),
        truncated=reply.done_reason == "length",
        calls=Calls(keys=keys, seconds=seconds),
        instruction=instruction,
    )


def given(row: RagRow) -> Answer:
    """The row's own answer as the original: no call, so no time spent."""
    return Answer(item=row.id, text=row.answer)
