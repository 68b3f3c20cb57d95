"""The post-test: eight short questions at the end of the day, graded on the spot, in both languages.

``python -m fp16lab workshop posttest`` prints the questions; ``--answers 1b,2c,...`` grades a learner's
answers (which ones are wrong, and the lesson that explains each); ``--lang zh`` in Chinese. Every keyed
answer is a fact the lessons check: tests/test_posttest.py recomputes each with PyTorch where it can
(FP16's largest value, the order of the AMP step, what ``unscale_`` does before clipping, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fp16lab import checks
from fp16lab.labs.runtime.i18n import check_lang

__all__ = ["Question", "QUESTIONS", "grade", "render"]


@dataclass(frozen=True)
class Question:
    """One multiple-choice question: text and choices in English and Chinese, the key, the lesson."""

    text: tuple[str, str]
    choices: tuple[tuple[str, str], ...]
    answer: str  # "a", "b", ...
    lesson: str


QUESTIONS: tuple[Question, ...] = (
    Question(("The largest finite FP16 value is about", "FP16 能表示的最大有限值约为"),
             (("3.4e38", "3.4e38"), ("65504", "65504"), ("448", "448"), ("2048", "2048")), "b", "01_fp16_numerics"),
    Question(("In FP16, 2048 + 1 equals", "在 FP16 中，2048 + 1 等于"),
             (("2049", "2049"), ("2048", "2048"), ("2050", "2050"), ("inf", "inf")), "b", "01_fp16_numerics"),
    Question(("The right order of one AMP step with gradient clipping is",
              "带梯度裁剪的 AMP 训练步的正确顺序是"),
             (("scale(loss).backward(), clip, unscale_, step, update",
               "scale(loss).backward()、裁剪、unscale_、step、update"),
              ("scale(loss).backward(), unscale_, clip, step, update",
               "scale(loss).backward()、unscale_、裁剪、step、update"),
              ("backward(), clip, step, update, unscale_", "backward()、裁剪、step、update、unscale_"),
              ("scale(loss).backward(), step, unscale_, clip, update",
               "scale(loss).backward()、step、unscale_、裁剪、update")), "b", "02_amp_training_loop"),
    Question(("After scaler.step(optimizer) sees an inf gradient, it", "scaler.step(optimizer) 遇到 inf 梯度时，它会"),
             (("skips the step and update() lowers the scale", "跳过这一步，update() 降低缩放因子"),
              ("clips the gradient to 65504", "把梯度裁剪到 65504"),
              ("steps in FP32 instead", "改用 FP32 执行这一步"),
              ("raises an error", "抛出错误")), "a", "02_amp_training_loop"),
    Question(("Under torch.autocast on CUDA with float16, a Linear layer's output dtype is",
              "在 CUDA 上使用 float16 的 torch.autocast 时，Linear 层输出的 dtype 是"),
             (("float32", "float32"), ("float16", "float16"), ("bfloat16", "bfloat16"),
              ("the dtype of its weights", "与权重的 dtype 相同")), "b", "02_amp_training_loop"),
    Question(("For FP16 Tensor Cores, matmul dimensions should be multiples of at least",
              "要用上 FP16 的 Tensor Core，矩阵乘法的维度至少应是几的倍数"),
             (("2", "2"), ("4", "4"), ("8", "8"), ("1024", "1024")), "c", "03_tensor_core_alignment"),
    Question(("AMP mostly saves memory on", "AMP 节省的显存主要来自"),
             (("the weights", "权重"), ("the optimizer state", "优化器状态"), ("the activations", "激活值"),
              ("the gradients' FP32 copies", "梯度的 FP32 副本")), "c", "05_pitfalls_speed_memory"),
    Question(("BF16 rather than FP16 is chosen mainly for", "选择 BF16 而不是 FP16，主要是为了"),
             (("its range (no loss scaling needed)", "它的动态范围（不需要损失缩放）"),
              ("more precision", "更高的精度"), ("twice the speed of FP16 on every GPU", "在所有 GPU 上比 FP16 快一倍"),
              ("smaller memory than FP16", "比 FP16 更省显存")), "a", "01_fp16_numerics"),
)

_WORDS = {
    "en": {"title": "Post-test: {n} questions (answer as 1b,2a,...)", "score": "{right} of {n} right",
           "wrong": "question {k}: {given} is not right; see lesson {lesson}", "missing": "question {k}: no answer"},
    "zh": {"title": "课后测验：共 {n} 题（按 1b,2a,... 的格式作答）", "score": "答对 {right} / {n} 题",
           "wrong": "第 {k} 题：{given} 不对；请看第 {lesson} 课", "missing": "第 {k} 题：没有作答"},
}


def render(lang: str = "en") -> str:
    """The questions as text, numbered, with lettered choices."""
    i = 0 if check_lang(lang) == "en" else 1
    out = [_WORDS[lang]["title"].format(n=len(QUESTIONS)), ""]
    for k, q in enumerate(QUESTIONS, 1):
        out.append(f"{k}. {q.text[i]}")
        out += [f"   {chr(97 + j)}) {c[i]}" for j, c in enumerate(q.choices)]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def grade(answers: str, lang: str = "en") -> tuple[int, list[str]]:
    """(number right, one line per wrong or missing answer) for answers such as ``"1b,2b,3b"``."""
    checks.text("answers", answers)
    lang = check_lang(lang)
    given: dict[int, str] = {}
    for part in re.split(r"[,\s]+", answers.strip()):
        if not part:
            continue
        m = re.fullmatch(r"(\d+)\s*([a-zA-Z])", part)
        if not m or not 1 <= int(m.group(1)) <= len(QUESTIONS):
            raise ValueError(f"answers must look like '1b,2a' with questions 1..{len(QUESTIONS)}, got {part!r} "
                             f"in {answers!r}")
        k, letter = int(m.group(1)), m.group(2).lower()
        if ord(letter) - 97 >= len(QUESTIONS[k - 1].choices):
            raise ValueError(f"answers: question {k} has choices a..{chr(96 + len(QUESTIONS[k - 1].choices))}, "
                             f"got {part!r}")
        given[k] = letter
    words = _WORDS[lang]
    notes, right = [], 0
    for k, q in enumerate(QUESTIONS, 1):
        if k not in given:
            notes.append(words["missing"].format(k=k))
        elif given[k] == q.answer:
            right += 1
        else:
            notes.append(words["wrong"].format(k=k, given=f"{k}{given[k]}", lesson=q.lesson))
    return right, [words["score"].format(right=right, n=len(QUESTIONS)), *notes]
