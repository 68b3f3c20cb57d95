"""What the learner's own run prints, in their language: one switch, one catalogue, English by default.

``FP16LAB_LANG=zh`` (which ``python -m fp16lab lab --lang zh`` sets for its kernels) turns the exercise
hints and verdicts, the stored-outputs note, the doctor's fixes and fp16lab's own warnings (see
:func:`format_warning`) into Chinese. The English text is the key (gettext-style), so English callers stay
readable: ``tr("Hint: assign {name}", name="tol")``.
A message without a Chinese entry, or an unknown ``FP16LAB_LANG``, falls back to English: never an
error. Chinese entries follow the glossary (术语表) of ``notebooks/zh/README.md``; each keeps the
same ``{fields}`` as its English (tests/test_i18n.py checks that, and that no entry is dead).
"""

from __future__ import annotations

import os
import warnings

from fp16lab import checks
from fp16lab.labs.runtime.i18n_hints import HINTS

__all__ = ["LANG_ENV", "LANGUAGES", "check_lang", "format_warning", "language", "tr", "ZH"]

LANG_ENV = "FP16LAB_LANG"
LANGUAGES = ("en", "zh")


def check_lang(value: object, name: str = "lang") -> str:
    """``value`` if it is one of :data:`LANGUAGES`; else ValueError naming ``name`` (explicit input is checked)."""
    return checks.one_of(name, value, LANGUAGES)


def language(lang: str | None = None) -> str:
    """``lang`` if given and known, else ``FP16LAB_LANG`` if known, else English (a switch never raises)."""
    if lang is not None and not isinstance(lang, str):
        raise TypeError(f"lang must be a str or None, got {type(lang).__name__}")
    raw = lang if lang is not None else os.environ.get(LANG_ENV, "")
    value = raw.strip().lower().replace("_", "-")
    if value in ("zh-cn", "zh-hans"):
        value = "zh"
    return value if value in LANGUAGES else "en"


def tr(msgid: str, /, *, lang: str | None = None, **fields: object) -> str:
    """``msgid`` in the chosen language (see :func:`language`), its ``{fields}`` filled in.

    Without fields the text is returned as it is (literal braces need no escaping); with fields it
    is a :meth:`str.format` template, in both languages.
    """
    if not isinstance(msgid, str):
        raise TypeError(f"msgid must be a str (the English text), got {type(msgid).__name__}")
    text = ZH.get(msgid, msgid) if language(lang) == "zh" else msgid
    return text.format(**fields) if fields else text


# The Chinese catalogue, keyed by the English msgid (the exercise hints in fp16lab/labs/runtime/i18n_hints.py). Terms: notebooks/zh/README.md's 术语表.
ZH: dict[str, str] = {
    **HINTS,
    # -- the doctor (fp16lab/course/env.py): the words OK/WARN/FAIL stay ---------------------------------------
    "check": "检查项",
    "value": "值",
    "status": "状态",
    "fix": "修复办法",
    "fix: {fix}": "修复：{fix}",
    "verdict: {verdict}": "结论：{verdict}",
    "no FAIL rows": "没有 FAIL 行",
    "at least one FAIL row: see the fixes above": "至少有一行 FAIL：见上面的修复办法",
    "not installed": "未安装",
    "not available": "不可用",
    "unknown": "未知",
    "`pip install {pkg}` (or run `make setup`)": "`pip install {pkg}`（或运行 `make setup`）",
    "{why}: `pip install {pkg}` (or run `make setup`)": "{why}：`pip install {pkg}`（或运行 `make setup`）",
    "needed to open the lessons in JupyterLab (`make lab`)": "在 JupyterLab 中打开课程需要它（`make lab`）",
    "needed for live progress bars in JupyterLab (without it they print as text)":
        "JupyterLab 中的实时进度条需要它（没有它，进度条以文本形式输出）",
    "install Python >= 3.10": "请安装 Python >= 3.10",
    "the lessons need torch >= {floor} (fp32_precision TF32 settings, allow_fp16_accumulation, FSDP2): `pip install -U 'torch>={floor}' torchvision` (or re-run `make setup`)":
        "课程需要 torch >= {floor}（fp32_precision 的 TF32 设置、allow_fp16_accumulation、FSDP2）：`pip install -U 'torch>={floor}' torchvision`（或重新运行 `make setup`）",
    "if this machine has an NVIDIA GPU, install a CUDA wheel: `pip install torch --index-url https://download.pytorch.org/whl/cu126`":
        "如果本机有 NVIDIA GPU，请安装 CUDA 版的 wheel：`pip install torch --index-url https://download.pytorch.org/whl/cu126`",
    "no CUDA device visible": "看不到 CUDA 设备",
    "torch has no CUDA support": "torch 不支持 CUDA",
    "none ({why})": "无（{why}）",
    "lessons run in quick mode on the CPU and show the committed reference outputs for GPU-only results; for your own numbers use an NVIDIA GPU (check `nvidia-smi`, and `CUDA_VISIBLE_DEVICES`)":
        "课程在 CPU 上以快速模式运行，只能在 GPU 上得到的结果改为显示已提交的参考输出；要得到你自己的数字，请使用 NVIDIA GPU（检查 `nvidia-smi` 和 `CUDA_VISIBLE_DEVICES`）",
    "unset {env} to measure this GPU as it is": "取消设置 {env}，才能按这块 GPU 的真实情况测量",
    "`nvidia-smi` not found or failed; check the driver install": "找不到 `nvidia-smi` 或运行失败；请检查驱动安装",
    "convolutions will be slow; reinstall a CUDA torch wheel (it bundles cuDNN)":
        "卷积会很慢；请重新安装 CUDA 版的 torch wheel（它自带 cuDNN）",
    "the series does not support this GPU with this torch build; torch's CUDA 12.6 wheels still ship Volta (sm_70) kernels: `pip install torch torchvision --index-url https://download.pytorch.org/whl/cu126`":
        "本系列在这个 torch 安装包下不支持这块 GPU；torch 的 CUDA 12.6 wheel 仍带有 Volta（sm_70）的核函数：`pip install torch torchvision --index-url https://download.pytorch.org/whl/cu126`",
    "'% of peak' figures are not shown; add your GPU's datasheet numbers to `PEAK_TFLOPS`":
        "不显示“峰值算力百分比”；请把你的 GPU 的规格书数字加入 `PEAK_TFLOPS`",
    "fp16 runs but without Tensor Cores: expect little or no AMP speed-up on this GPU":
        "fp16 能运行，但没有 Tensor Core：在这块 GPU 上 AMP 几乎不会带来加速",
    "use fp16 with GradScaler; `torch.cuda.is_bf16_supported()` may still say True here because bf16 is emulated (slow)":
        "请用 fp16 加 GradScaler；这里 `torch.cuda.is_bf16_supported()` 可能仍返回 True，因为 bf16 是模拟的（很慢）",
    "FP32 matmuls run at plain FP32 speed": "FP32 矩阵乘法以普通 FP32 的速度运行",
    # the doctor's row labels (Check.name stays the English key) and values
    "quick mode": "运行模式",
    "torch CUDA build": "torch 的 CUDA 版本",
    "TF32 settings": "TF32 设置",
    "hardware profile": "硬件配置档",
    "driver": "驱动",
    "compute capability": "计算能力",
    "SMs": "SM 数量",
    "memory": "显存",
    "BF16 native": "原生 BF16",
    "peak table": "峰值算力表",
    "torchvision works": "torchvision 可用",
    "GPU shared": "GPU 共享",
    "yes": "是",
    "no": "否",
    "quick": "快速模式",
    "full": "完整模式",
    "full, fewer steps (smoke)": "完整模式，步数更少（冒烟运行）",
    "{mode} ({reason})": "{mode}（{reason}）",
    "no CUDA GPU": "没有 CUDA GPU",
    "CI is set": "设置了 CI",
    "CUDA GPU: {label}": "CUDA GPU：{label}",
    "{name} profile ({profile}) on a real {real}: memory and code path emulated, speed is the real chip's":
        "{name} 硬件配置档（{profile}），实际运行在 {real} 上：显存和代码路径是模拟的，速度是实际芯片的",
    "CPU-only wheel": "仅 CPU 的 wheel",
    "available (fp16 autocast works; no GradScaler speed claims)": "可用（fp16 autocast 能用；不对 GradScaler 的速度下结论）",
    "{env} not usable": "{env} 不可用",
    "{sm}: this torch build has no kernels for it (built for {arches})":
        "{sm}：这个 torch 安装包里没有为它编译的核函数（编译目标为 {arches}）",
    "{name!r} is not in fp16lab.hardware.PEAK_TFLOPS": "{name!r} 不在 fp16lab.hardware.PEAK_TFLOPS 中",
    "{gpu}: FP32 {fp32}, TF32 {tf32}, FP16 {fp16}, BF16 {bf16}, FP16-accumulate {acc16}, FP8 {fp8} dense TFLOP/s (cited: {source})":
        "{gpu}：FP32 {fp32}、TF32 {tf32}、FP16 {fp16}、BF16 {bf16}、FP16 累加 {acc16}、FP8 {fp8} 稠密 TFLOP/s（引用：{source}）",
    "no ({sm} < {floor})": "否（{sm} < {floor}）",
    "no ({name}: a GTX 16xx has none)": "否（{name}：GTX 16xx 没有 Tensor Core）",
    "yes (lesson 09_fp8)": "是（见第 09 课）",
    "no ({sm} < sm_89; lesson 09_fp8 shows its numerics and the reference run)":
        "否（{sm} < sm_89；第 09 课展示它的数值特性和参考运行）",
    "matmul.fp32_precision={matmul!r}, cudnn.conv.fp32_precision={conv!r} (PyTorch's default: 'ieee' matmuls, 'tf32' convolutions)":
        "matmul.fp32_precision={matmul!r}，cudnn.conv.fp32_precision={conv!r}（PyTorch 的默认值：矩阵乘法 'ieee'，卷积 'tf32'）",
    "{why}; torch says: \"{reason}\"": "{why}；torch 给出的原因：“{reason}”",
    "update the NVIDIA driver to {need} or newer (Linux; cited: NVIDIA's CUDA release notes), then run the doctor again":
        "把 NVIDIA 驱动升级到 {need} 或更新（Linux；引用：NVIDIA CUDA 发行说明），然后再运行 doctor",
    "; or keep this driver and install torch built for CUDA {cuda}: `pip install --force-reinstall torch torchvision --index-url {index}{tag}`":
        "；或者保留这个驱动，安装为 CUDA {cuda} 构建的 torch：`pip install --force-reinstall torch torchvision --index-url {index}{tag}`",
    "{driver} supports CUDA up to {have}, but torch {torch} is built with CUDA {wheel}: the driver is too old, so torch sees no GPU":
        "驱动 {driver} 最高支持 CUDA {have}，而 torch {torch} 是用 CUDA {wheel} 构建的：驱动太旧，所以 torch 看不到 GPU",
    "install the torchvision built for this torch, from the same place as torch (torch {torch} goes with torchvision {match}.x; a CPU-only torch with the one from {index}cpu): `pip install --force-reinstall torch=={plain} torchvision --index-url <the index torch came from>`":
        "从安装 torch 的同一来源安装与这个 torch 配套的 torchvision（torch {torch} 配 torchvision {match}.x；仅 CPU 的 torch 配 {index}cpu 上的版本）：`pip install --force-reinstall torch=={plain} torchvision --index-url <torch 来自的索引>`",
    "{version}: `import torchvision.models` fails: \"{error}\"": "{version}：`import torchvision.models` 失败：“{error}”",
    "{version}: models import; its operators fail (\"{error}\")": "{version}：模型可以导入；它的算子运行失败（“{error}”）",
    "the lessons need only the models and transforms; for detection ops: {fix}":
        "课程只用到模型和 transforms；如果需要检测类算子：{fix}",
    "{version}: models import, ops.nms runs": "{version}：模型可以导入，ops.nms 能运行",
    "no CUDA GPU here: nothing shares it": "这里没有 CUDA GPU：不存在共享",
    "cuda:{index} is not shared: no other process uses it now": "cuda:{index} 没有被共享：现在没有其他进程在用它",
    "{n} other process(es): {list}": "另有 {n} 个进程：{list}",
    "{gib:.1f} GiB held by others": "其他进程占用 {gib:.1f} GiB",
    "{n} learners share it ({env})": "{n} 位学习者共用它（{env}）",
    "cuda:{index} is SHARED ({who}). The GPU time-slices between processes: your speed numbers come out lower and noisier than the card's own, and a lesson's speed check can fail because of a neighbour's work, not yours. Run the speed sections again when the GPU is quiet, or read the stored reference outputs; numerics and memory checks are not affected.":
        "cuda:{index} 正被共享（{who}）。GPU 在多个进程之间分时运行：你测得的速度会比这张卡本身的低，波动也更大；某课的速度检查可能因为别人的任务而失败，而不是因为你的代码。请在 GPU 空闲时重新运行测速的小节，或者阅读已存的参考输出；数值和显存检查不受影响。",
    # lesson 00's cell that runs the doctor as a command
    "python -m fp16lab doctor: exit status {rc}, {n} lines; the rows that are not OK (the full report is the one above):":
        "python -m fp16lab doctor：退出状态 {rc}，共 {n} 行；下面是不为 OK 的行（完整报告见上面）：",
    "every row OK": "每一行都是 OK",
    # -- banners: the mode, the committed GPU reference, the stored outputs -------------------------------------
    "{title} ({reason}): {meaning}": "{title}（{reason}）：{meaning}",
    " ({reason})": "（{reason}）",
    "QUICK MODE": "快速模式",
    "FULL MODE": "完整模式",
    "FULL-SMOKE MODE": "完整模式（冒烟运行）",
    "sizes are shrunk so every lesson runs in minutes on a laptop CPU. Numbers measured in this mode are not FP16 speed-ups; the GPU reference outputs show those.":
        "问题规模已缩小，每课在笔记本电脑的 CPU 上几分钟就能跑完。这个模式下测得的数字不代表 FP16 的加速效果；加速效果请看 GPU 参考输出。",
    "full problem sizes and code paths, fewer steps and repeats (profile smoke run).":
        "完整的问题规模和代码路径，但步数和重复次数更少（硬件配置档的冒烟运行）。",
    "full problem sizes.": "完整的问题规模。",
    "NO GPU REFERENCE YET: results/{name}.json has not been recorded on a GPU, so this section has nothing to show on this machine. It needs a CUDA GPU: run the lesson on one (full mode) to measure it.":
        "尚无 GPU 参考结果：results/{name}.json 还没有在 GPU 上记录，所以本节在这台机器上没有内容可显示。它需要 CUDA GPU：在有 GPU 的机器上（完整模式）运行本课来测量。",
    " (Recorded references with similar names: {found}: a typo?)": "（已记录的参考结果中有名称相近的：{found}：是不是拼错了？）",
    "COMMITTED GPU REFERENCE {name}.json: {device} ({capability}{sms}), torch {torch}, CUDA {cuda}, cuDNN {cudnn}, {date}, {mode} mode. Not measured on this machine.":
        "已提交的 GPU 参考结果 {name}.json：{device}（{capability}{sms}），torch {torch}，CUDA {cuda}，cuDNN {cudnn}，{date}，{mode}。不是在本机上测得的。",
    ", {n} SMs": "，{n} 个 SM",
    "WARNING: results/{name}.json was not measured on a CUDA GPU (device_type {device_type!r}): it is a stand-in, not a reference. Re-record it on a GPU with `python -m fp16lab.course.outputs run --reference <lesson>`.":
        "警告：results/{name}.json 不是在 CUDA GPU 上测得的（device_type {device_type!r}）：它只是替代品，不是参考结果。请在 GPU 上用 `python -m fp16lab.course.outputs run --reference <lesson>` 重新记录。",
    "**Stored outputs from {where}**{detail}, **not from your computer.**":
        "**已存输出：英文版课程在 {where}{detail}上的运行结果，不是在你的电脑上得到的。** 所以这些输出是英文；在中文 lab 里运行后，提示、横幅、环境检查（doctor）、第 00 课的“在你的显卡上”信息框和练习结论会变成中文，表格和各课代码打印的分析行仍是英文（两种语言的代码完全相同）。",
    "Stored outputs: made on {where}{detail}, not on your computer.":
        "已存输出：英文版课程在 {where}{detail}上的运行结果，不是在你的电脑上得到的。所以这些输出是英文；在中文 lab 里运行后，提示、横幅、环境检查（doctor）、第 00 课的“在你的显卡上”信息框和练习结论会变成中文，表格和各课代码打印的分析行仍是英文（两种语言的代码完全相同）。",
    "This is your copy: run it (Run > Run All Cells) and these outputs become yours. The reference stays unchanged in notebooks/.":
        "这是你的副本：运行它（运行 → 运行所有单元格），这些输出就成了你自己的。参考版保持不变，在 notebooks/zh/ 中。",
    "This is your copy: run it (*Run → Run All Cells*) and these outputs become yours. The reference stays unchanged in `notebooks/`.":
        "这是你的副本：运行它（*运行 → 运行所有单元格*），这些输出就成了你自己的。参考版保持不变，在 `notebooks/zh/` 中。",
    "This is the read-only reference: to run it, open your copy in notebooks/work/ (`make lab` or `python -m fp16lab lab` makes it).":
        "这是只读的参考版：要运行它，请打开 notebooks/work/zh/ 中你的副本（`make lab LAB_LANG=zh` 或 `python -m fp16lab lab --lang zh` 会创建它）。",
    "This is the read-only reference: to run it, open your copy in `notebooks/work/` (`make lab` or `python -m fp16lab lab` makes it).":
        "这是只读的参考版：要运行它，请打开 `notebooks/work/zh/` 中你的副本（`make lab LAB_LANG=zh` 或 `python -m fp16lab lab --lang zh` 会创建它）。",
    # -- the "On your card" box (fp16lab/course/card.py) ------------------------------------------------------
    "On your card": "在你的显卡上",
    "On this machine (no CUDA GPU)": "在这台机器上（没有 CUDA GPU）",
    "none: the lessons run in quick mode (small sizes, few steps) on this device":
        "无：课程在这台设备上以快速模式运行（规模小、步数少）",
    "speed claims": "速度结论",
    "not measured here: the lessons show the committed GPU reference results, labelled with the GPU that made them, and assert no speed":
        "不在这里测量：课程展示已提交的 GPU 参考结果，并注明测量所用的 GPU，不对速度做断言",
    "FP16 / BF16 here": "这里的 FP16 / BF16",
    "CPUs have no Tensor Cores; many convert FP16 to FP32 and back, so FP16 can be slower than FP32: numerics are the same, speed is not":
        "CPU 没有 Tensor Core；许多 CPU 会把 FP16 转成 FP32 计算再转回来，所以 FP16 可能比 FP32 还慢：数值特性相同，速度则不同",
    "autocast here": "这里的 autocast",
    "CPU autocast uses BF16 and has its own op lists (section 5b)": "CPU 上的 autocast 使用 BF16，算子列表也与 CUDA 不同（第 5b 节）",
    "GeForce parts usually run it at twice the FP32-accumulate rate": "GeForce 显卡通常以 FP32 累加速率的两倍运行它",
    "data-center parts run it at the FP32-accumulate rate": "数据中心 GPU 运行它的速率与 FP32 累加相同",
    "no cited peak for this chip in fp16lab.hardware.PEAK_TFLOPS; {kind}: measure it (section 6)":
        "fp16lab.hardware.PEAK_TFLOPS 中没有这块芯片的引用峰值；{kind}：请实测（第 6 节）",
    "; FP16-accumulate: {source}": "；FP16 累加：{source}",
    "memory: an {n}x{n} matmul's FP32 operands and result take {mib:,.0f} MiB of the {total:,} MiB the {card} reports ({pct:.0%})":
        "显存：一个 {n}x{n} 矩阵乘法的 FP32 操作数和结果占 {mib:.0f} MiB，{card} 共报告 {total} MiB（{pct:.0%}）",
    "(cited, {source}: {fp16:g} vs {acc16:g} TFLOP/s)": "（引用：{source}，{fp16:g} 对 {acc16:g} TFLOP/s）",
    "{paper} whitepaper, {model} scaled to {sms} SMs": "{paper} 白皮书，由 RTX {model} 按 {sms} 个 SM 折算",
    "{paper} whitepaper per-SM rates x {sms} SMs x {mhz} MHz max boost (laptop clocks vary with power limit)":
        "{paper} 白皮书的每 SM 速率 × {sms} 个 SM × {mhz} MHz 最高加速频率（笔记本电脑的频率随功耗上限而变）",
    "{paper} whitepaper per-SM rates x {sms} SMs x {mhz} MHz": "{paper} 白皮书的每 SM 速率 × {sms} 个 SM × {mhz} MHz",
    # the cited documents themselves (course/card.py's cited_source): the kind of document as the lessons say it
    "{gpu} datasheet": "{gpu} 规格书",
    "{gpu} datasheet ({variant})": "{gpu} 规格书（{variant}）",
    "{paper} whitepaper": "{paper} 白皮书",
    "NVIDIA Ada GPU architecture whitepaper": "NVIDIA Ada GPU 架构白皮书",
    "NVIDIA H100 Tensor Core GPU Architecture whitepaper (SXM5, dense)": "NVIDIA H100 Tensor Core GPU 架构白皮书（SXM5，稠密）",
    "raises the FP16 Tensor Core peak {gain:.0f}x {cited}, at an accuracy cost (lesson 03): worth trying for inference and for matmul-bound layers":
        "把 FP16 Tensor Core 的峰值提高到 {gain:.0f} 倍{cited}，代价是精度（第 03 课）：推理和以矩阵乘法为主的层值得一试",
    "same peak as FP32 accumulation {cited}: no speed-up on paper; keep FP32 accumulation unless section 6 measures a gain worth its accuracy cost (lesson 03)":
        "峰值与 FP32 累加相同{cited}：纸面上没有加速；除非第 6 节测得的加速值得付出它的精度代价（第 03 课），否则保持 FP32 累加",
    "card": "显卡",
    "{name} ({sm}, {gib:.0f} GiB)": "{name}（{sm}，{gib:.0f} GiB）",
    "{profile}: memory and code path of this card; every speed printed is the real {real}'s, so speed ratios are reported, not asserted":
        "{profile}：采用这张卡的显存和代码路径；打印出的速度都是实际运行的 {real} 的速度，所以速度比值只报告、不做断言",
    "FP16 Tensor Cores": "FP16 Tensor Core",
    "yes: FP16 autocast runs matmuls and convolutions on them (sm_70+)": "有：FP16 autocast 在 Tensor Core 上运行矩阵乘法和卷积（sm_70+）",
    "no (before Volta, or a GTX 16xx): FP16 saves memory here, not time; stay in FP32 for speed":
        "没有（Volta 之前的架构，或 GTX 16xx）：FP16 在这里只省显存、不省时间；要速度就留在 FP32",
    "native BF16": "原生 BF16",
    "yes (sm_80+): BF16 autocast needs no GradScaler": "有（sm_80+）：BF16 autocast 不需要 GradScaler",
    "no (needs sm_80+): torch may still accept BF16 through slow emulation; train in FP16 with a GradScaler":
        "没有（需要 sm_80+）：torch 也许仍然接受 BF16，但那是很慢的模拟；请用 FP16 加 GradScaler 训练",
    "yes: cuDNN convolutions use it by default, matmuls do not (section 4); say which 'FP32' you measure":
        "有：cuDNN 卷积默认使用它，矩阵乘法默认不用（第 4 节）；要说清楚你测的是哪一种“FP32”",
    "no (needs sm_80+): FP32 here is true FP32": "没有（需要 sm_80+）：这里的 FP32 就是真正的 FP32",
    "yes (sm_89+): lesson 09 trains with it here": "有（sm_89+）：第 09 课会在这里用它训练",
    "no (needs sm_89+): lesson 09 shows its committed reference results": "没有（需要 sm_89+）：第 09 课展示已提交的参考结果",
    "FP16 accumulation": "FP16 累加",
    # -- fp16lab's own warnings (fp16lab.precision's categories), shown through format_warning below ------------
    "{precision} on the CPU runs, but is slow on CPUs without native half-precision math; CPU timings are not FP16 speed-ups. (Shown once per session.)":
        "{precision} 可以在 CPU 上运行，但在没有原生半精度运算的 CPU 上很慢；CPU 上的计时不代表 FP16 的加速效果。（每个会话只提示一次。）",
    "fp16/bf16 matmuls on the CPU are slow and use no Tensor Cores; these are not FP16 speed figures":
        "CPU 上的 fp16/bf16 矩阵乘法很慢，也用不到 Tensor Core：这些数字不是 FP16 的速度",
    # -- lesson 09's status lines and banner (fp16lab/labs/fp8): FP8 here, torchao, a section not measured ----------
    "FP8: yes. {reason}": "FP8：支持。{reason}",
    "FP8: no. {reason}": "FP8：不支持。{reason}",
    "no CUDA GPU is visible here": "这里看不到 CUDA GPU",
    "{label} is {sm}: FP8 Tensor Cores (sm_89 Ada and newer)": "{label} 是 {sm}：有 FP8 Tensor Core（sm_89 的 Ada 及更新的架构）",
    "{label} is {sm}; FP8 Tensor Cores need sm_89 (Ada) or newer (Hopper is sm_90): this GPU cannot run FP8 matmuls":
        "{label} 是 {sm}；FP8 Tensor Core 需要 sm_89（Ada）或更新的架构（Hopper 是 sm_90）：这块 GPU 不能运行 FP8 矩阵乘法",
    "PyTorch's CPU kernel runs FP8 matmuls: right numerics, no speed-up":
        "PyTorch 的 CPU 核函数能运行 FP8 矩阵乘法：数值正确，但没有加速",
    "PyTorch's CPU kernel runs FP8 matmuls: right numerics, no speed-up; rowwise scales are emulated (its kernel is per-tensor only)":
        "PyTorch 的 CPU 核函数能运行 FP8 矩阵乘法：数值正确，但没有加速；按行缩放是模拟的（它的核函数只支持按张量缩放）",
    "torch {version} has no CPU kernel for torch._scaled_mm": "torch {version} 没有 torch._scaled_mm 的 CPU 核函数",
    "PyTorch has no FP8 matmul on {kind!r}": "PyTorch 在 {kind!r} 上没有 FP8 矩阵乘法",
    "torchao {version}: torchao.float8 imports (float8 training available)":
        "torchao {version}：torchao.float8 可以导入（可以进行 float8 训练）",
    "torchao not available ({reason}); install it with: {command}  (or: {alternative})":
        "torchao 不可用（导入时出错：“{reason}”）；安装方法：{command}（或者：{alternative}）",
    "torchao import notes (captured, not errors): {notes}": "torchao 导入时的输出（已捕获，不是错误）：{notes}",
    "{n} optional C++ extension(s) not loaded ({names}: kernels for MX formats and sm_90a CUTLASS, unused by float8 training)":
        "{n} 个可选的 C++ 扩展没有加载（{names}：MX 格式和 sm_90a CUTLASS 的核函数，float8 训练用不到）",
    "{n} log message(s) ({first!r}...)": "{n} 条日志消息（{first!r}……）",
    "{n} warning(s) from torchao's own source ({kinds}), harmless": "torchao 自身源代码发出的 {n} 条警告（{kinds}），无害",
    "other output: {first!r}": "其他输出：{first!r}",
    "; ": "；",
    "NOT MEASURED HERE: {blocked}. Showing the committed reference instead.": "此处未测量：{blocked}。改为显示已提交的参考结果。",
    # -- lesson 10's in-notebook process pool (fp16lab/labs/multi_gpu/launcher.py): ranks that do not answer -------
    "{who} did not finish {what} within the timeout of {limit:g} s ({answered} of {n} ranks answered); all workers were stopped. A rank that hangs, or waits in a collective for a rank that never joins it, looks like this. Start new Workers to continue.":
        "{who} 没有在 {limit:g} 秒的超时时间内完成{what}（{n} 个 rank 中有 {answered} 个响应）；所有工作进程都已停止。某个 rank 卡住，或者在集合通信中等待一个永远不会加入的 rank 时，就会出现这种情况。请启动新的 Workers 再继续。",
    "rank {r} exited (exit code {code}) during {what} without a result; all workers were stopped. Its error is on the launcher's stderr (the terminal running Jupyter or the script; a script must start workers under `if __name__ == '__main__':`). Start new Workers to continue.":
        "rank {r} 在{what}期间退出（退出码 {code}），没有返回结果；所有工作进程都已停止。它的错误信息在启动方的 stderr 上（运行 Jupyter 或脚本的终端；脚本必须在 `if __name__ == '__main__':` 之下启动工作进程）。请启动新的 Workers 再继续。",
    "rank {r} exited (exit code {code}) during {what}; rank {rank} then failed: {error}; all workers were stopped. Start new Workers to continue.":
        "rank {r} 在{what}期间退出（退出码 {code}）；随后 rank {rank} 失败：{error}；所有工作进程都已停止。请启动新的 Workers 再继续。",
    "rank {rank} failed in {what}: {error}; all workers were stopped.\n--- traceback of rank {rank} ---\n{details}":
        "rank {rank} 在{what}中失败：{error}；所有工作进程都已停止。\n--- rank {rank} 的回溯信息 ---\n{details}",
    "ranks {ranks}": "rank {ranks}",
    ", ": "、",
    "task {name!r}": "任务 {name!r}",
    "start-up (spawn, import torch, join the process group)": "启动（spawn、import torch、加入进程组）",
    # -- the library's own reports and errors (fp16lab.checks.say): fit's TrainingDiverged, first_nonfinite, bit_view --
    "a lower learning rate": "降低学习率",
    "gradient clipping (clip_grad_norm=1.0)": "梯度裁剪（clip_grad_norm=1.0）",
    "keeping the unstable op in an FP32 island (fp16lab.precision.autocast('fp32', device))":
        "把不稳定的算子放进 FP32 孤岛（fp16lab.precision.autocast('fp32', device)）",
    "bf16 instead of fp16 (fp32's range, no scaler needed)": "用 bf16 代替 fp16（数值范围与 fp32 相同，不需要 GradScaler）",
    "fp32 for the layers that overflow": "上溢的层改用 fp32",
    "Try: {tips}.": "可以尝试：{tips}。",
    "micro-batch {i} of {n}: its {what} hold {n_nan} NaN and {n_inf} inf values":
        "第 {i} 个微批次（共 {n} 个）：它的{what}含有 {n_nan} 个 NaN 和 {n_inf} 个 inf",
    "inputs": "输入",
    "targets": "目标",
    "step {step}: the loss is {loss} because the data is not finite ({bad}). Check your data: look for NaN/inf in the dataset and in the preprocessing (a division by zero, log of 0, a missing value).":
        "第 {step} 步：损失为 {loss}，因为数据不是有限值（{bad}）。请检查数据：在数据集和预处理中查找 NaN/inf（除以零、对 0 取对数、缺失值）。",
    "step {step}: the loss is {loss} (not finite) training in {precision}. ":
        "第 {step} 步：以 {precision} 训练时损失为 {loss}（不是有限值）。",
    "step {step}: the loss was not finite on {streak} steps in a row in fp16: the forward pass overflows, which no loss scale can fix (min_scale=None turned the scale check off). ":
        "第 {step} 步：fp16 下连续 {streak} 步的损失都不是有限值：前向传播上溢了，任何损失缩放因子都救不回来（min_scale=None 关闭了对缩放因子的检查）。",
    "step {step}: the gradient norm is {norm} in {precision} (no GradScaler skips such a step: the weights are no longer finite). ":
        "第 {step} 步：{precision} 下梯度范数为 {norm}（没有 GradScaler 来跳过这样的步：权重已经不是有限值了）。",
    ": the loss itself is not finite, the forward pass overflows": "：损失本身就不是有限值，前向传播上溢了",
    "step {step}: the fp16 loss scale fell to {scale:g}, below min_scale={min_scale:g} ({recent} of the last {n} steps were skipped for inf/NaN gradients; last loss {loss:g}{forward}). A scale below min_scale is a heuristic sign of divergence (GradScaler itself does not promise a scale >= 1); DivergenceGuard(min_scale=None) turns it off. ":
        "第 {step} 步：fp16 的损失缩放因子降到 {scale:g}，低于 min_scale={min_scale:g}（最近 {n} 步中有 {recent} 步因梯度含 inf/NaN 而被跳过；最后一次的损失为 {loss:g}{forward}）。缩放因子低于 min_scale 只是发散的经验信号（GradScaler 本身并不保证缩放因子 >= 1）；DivergenceGuard(min_scale=None) 可以关闭这项检查。",
    "all outputs finite under {precision} (largest |value| {peak:.4g})": "{precision} 下所有输出都是有限值（最大 |值| 为 {peak:.4g}）",
    "first non-finite output under {precision}: {first} ({type}, {dtype}): {n_inf} inf, {n_nan} NaN":
        "{precision} 下第一个出现非有限值的输出：{first}（{type}，{dtype}）：{n_inf} 个 inf，{n_nan} 个 NaN",
    "{fmt}: {input!r} is stored as {value!r} ({kind}{note})": "{fmt}：{input!r} 存储为 {value!r}（{kind}{note}）",
    "zero": "零",
    "subnormal": "次正规数",
    "normal": "正规数",
    ", overflow": "，上溢",
    ", overflow: saturated to the max, {fmt} has no inf": "，上溢：饱和到最大值（{fmt} 没有 inf）",
    "sign {n}": "符号位 {n}",
    "exponent {n}": "指数位 {n}",
    "mantissa {n}": "尾数位 {n}",
    "exponent bits 0: no implicit 1": "指数位全为 0：没有隐含的 1",
    # -- argument errors (fp16lab/checks.py, fp16lab/precision.py) ----------------------------------------------
    "{name} must be an int >= {minimum}, got {value!r}": "{name} 必须是不小于 {minimum} 的整数，实际为 {value!r}",
    "{name} must be a finite number >= 0, got {value!r}": "{name} 必须是不小于 0 的有限数，实际为 {value!r}",
    "{name} must be a finite number > 0, got {value!r}": "{name} 必须是大于 0 的有限数，实际为 {value!r}",
    "{name} must be one of {names}; got {value}": "{name} 必须是 {names} 之一，实际为 {value}",
    "{name} must be True or False, got {value!r}": "{name} 必须是 True 或 False，实际为 {value!r}",
    "{name}: unknown precision {value!r}; allowed: {allowed}{hint}": "{name}：未知的精度 {value!r}；可选值：{allowed}{hint}",
    " (a precision name, not a dtype: e.g. torch.float16 is 'fp16')":
        "（要写精度名称，不是 dtype：例如 torch.float16 对应 'fp16'）",
    # -- the audit's fix column (fp16lab/align/audit.py) -------------------------------------------------------
    "change the model: the layer before must produce {s} features (e.g. the hidden size in its config)":
        "修改模型：前一层必须输出 {s} 个特征（例如修改配置中的隐藏层大小）",
    "change the model: set the hidden size to {s} in its config": "修改模型：在配置中把隐藏层大小设为 {s}",
    "change the model: the layer before must produce {s} channels (pad_layers pads no convolutions)":
        "修改模型：前一层必须输出 {s} 个通道（pad_layers 不填充卷积层）",
    "change the model: give this convolution {s} output channels (pad_layers pads no convolutions)":
        "修改模型：让这个卷积层输出 {s} 个通道（pad_layers 不填充卷积层）",
    "choose a batch size × tokens that is a multiple of {m}": "把 批处理大小 × token 数 取为 {m} 的倍数",
    "K of y = x·Wᵀ: the leading dimension of x and W": "y = x·Wᵀ 中的 K：x 和 W 的主维度",
    "N of y = x·Wᵀ: the leading dimension of y (an output head or vocabulary)":
        "y = x·Wᵀ 中的 N：y 的主维度（输出头或词表）",
    "the vocabulary: N of the logits matmul when tied to an output head (the lookup alone is memory-bound)":
        "词表大小：与输出头共享权重时，是 logits 矩阵乘法的 N（单独查表是访存受限的）",
    "the hidden size: K of every matmul that reads these vectors": "隐藏层大小：读取这些向量的每个矩阵乘法的 K",
    "C of the input: K of the implicit GEMM (cuDNN Tensor Core kernels want C % {m} == 0)":
        "输入的通道数 C：隐式 GEMM 的 K（cuDNN 的 Tensor Core 核函数要求 C % {m} == 0）",
    "K filters: N of the implicit GEMM": "K 个卷积核：隐式 GEMM 的 N",
    "rows of x (batch × tokens): M of the forward matmul, K of the weight-gradient one (not a leading dimension: costs less than a misaligned width)":
        "x 的行数（批处理大小 × token 数）：前向矩阵乘法的 M、权重梯度矩阵乘法的 K（不是主维度：代价比未对齐的宽度小）",
    "{reason}; {precision} Tensor Cores want multiples of {m}{extra}": "{reason}；{precision} 的 Tensor Core 要求 {m} 的倍数{extra}",
    " (weight tied with {others}: pad them together)": "（与 {others} 共享权重：要一起填充）",
    " (one module, also registered as {names}: padding it pads every name)": "（同一个模块，也注册为 {names}：填充它就填充了所有名称）",
    "lazy module not initialised yet: run one forward pass first": "惰性模块尚未初始化：先运行一次前向传播",
    "depthwise convolution: memory-bound, not a Tensor Core GEMM; alignment does not apply":
        "深度卷积：访存受限，不是在 Tensor Core 上运行的 GEMM；对齐不适用",
    " per group": "（每组）",
    " (an RGB/grey first layer is usual: cuDNN pads small C itself; one layer of many)":
        "（RGB/灰度输入的第一层通常如此：cuDNN 会自己填充很小的 C；只是众多层中的一层）",
    "pad_layers cannot: {why}; change the size to {s} in the model's definition":
        "pad_layers 无法填充：{why}；请在模型定义中把尺寸改为 {s}",
    "; pad_layers(model, {pad!r}) fixes the paddable ones": "；pad_layers(model, {pad!r}) 可以修正其中能填充的那些",
    "{n} layers checked for {precision} (multiple of {multiple}): {bad} misaligned size(s) of {sizes} checked, {skipped} module(s) skipped{fix}":
        "按 {precision}（{multiple} 的倍数）检查了 {n} 个层：检查的 {sizes} 个尺寸中有 {bad} 个未对齐，跳过了 {skipped} 个模块{fix}",
    "skipped:": "跳过的模块：",
    "Skipped:": "跳过的模块：",
    "Alignment audit": "对齐检查",
    "Every checked size is aligned.": "检查的每个尺寸都已对齐。",
    "exponent all ones, mantissa 0 -> {sign}inf": "指数位全为 1，尾数为 0 -> {sign}inf",
    "exponent all ones, mantissa all ones -> nan": "指数位全为 1，尾数全为 1 -> nan",
    "exponent all ones, mantissa != 0 -> nan": "指数位全为 1，尾数 != 0 -> nan",
    # -- the lab (fp16lab/course/lab.py): a reference lesson's tab label ------------------------------------------
    "reference · ": "参考版 · ",
    "exercises · ": "练习版 · ",
    "read-only reference": "只读参考版",
    "your workspace: {folder}": "你的工作区：{folder}",
    "  new copies: {names}": "  新副本：{names}",
    "  kept as they are (your work): {n} file(s)": "  保持原样（你的成果）：{n} 个文件",
    "  note: the lesson behind {name} has changed since you copied it; `{command}` gives a fresh copy (yours moves to {old})":
        "  注意：{name} 对应的课程在你复制之后有改动；`{command}` 会给你一份全新副本（你的旧副本移到 {old}）",
    "fresh copy: {fresh}": "全新副本：{fresh}",
    "fresh copy: {fresh} (your previous copy: {old})": "全新副本：{fresh}（你之前的副本：{old}）",
    "starting JupyterLab on {nbdir} (lessons outside work/ are read-only here; Ctrl-C stops it)":
        "正在启动 JupyterLab，课程目录为 {nbdir}（work/ 以外的课程在这里是只读的；按 Ctrl-C 停止）",
    "reachable from other machines: http://{host}:{port}/lab?token={token}": "其他机器可以访问：http://{host}:{port}/lab?token={token}",
}


# ---- fp16lab's own warnings, in the reader's language ------------------------------------------------------------
#
# The learner library imports no catalogue (labs and course import the library, never the reverse), so it issues its
# warnings in English, each with a category of its own (fp16lab.precision.HalfOnCPUWarning, HalfMatmulOnCPUWarning).
# The lessons filter them by that English text (`warnings.filterwarnings("once", message="fp16 on the CPU runs")`),
# and their code is the same in both labs: so the text stays English where filters match it, and only what is shown
# changes. This module replaces warnings.formatwarning (the hook the warnings module offers for that) once, on import;
# every lesson imports it (its first cell imports fp16lab.course.runtime.quick).


def _in_language(message: Warning | str) -> Warning | str:
    """``message`` as the reader sees it: one of fp16lab's own warnings in Chinese under ``FP16LAB_LANG=zh``."""
    if language() != "zh" or type(message).__module__ != "fp16lab.precision":
        return message
    # fp16lab.precision is loaded already (it made the warning): importing it here costs nothing, and not at the top
    # keeps torch out of what imports the catalogue alone (the lab's command line)
    from fp16lab.precision import HalfMatmulOnCPUWarning, HalfOnCPUWarning

    if isinstance(message, HalfOnCPUWarning):
        return tr("{precision} on the CPU runs, but is slow on CPUs without native half-precision math; CPU timings "
                  "are not FP16 speed-ups. (Shown once per session.)", precision=message.precision)
    if isinstance(message, HalfMatmulOnCPUWarning):
        return tr("fp16/bf16 matmuls on the CPU are slow and use no Tensor Cores; these are not FP16 speed figures")
    return message


def format_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                   line: str | None = None) -> str:
    """:func:`warnings.formatwarning`, with fp16lab's own warnings in the reader's language (any other as it was)."""
    return _PLAIN_FORMAT(_in_language(message), category, filename, lineno, line)


_PLAIN_FORMAT = getattr(warnings.formatwarning, "plain", warnings.formatwarning)  # a reload wraps the original
format_warning.plain = _PLAIN_FORMAT  # type: ignore[attr-defined]
warnings.formatwarning = format_warning
checks.install_catalogue(tr)  # the library's reports and errors (fp16lab.checks.say) in the reader's language
