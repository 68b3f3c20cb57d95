"""The Chinese catalogue's exercise verdicts and hints (fp16lab/course/answers), one block per lesson.

Part of :data:`fp16lab.labs.runtime.i18n.ZH` (kept apart so that each file stays readable); same rules: keyed by the
English msgid, the same ``{fields}``, terms from notebooks/zh/README.md's 术语表.
"""

from __future__ import annotations

HINTS: dict[str, str] = {
    # -- exercise verdicts and hints (fp16lab/course/answers) --------------------------------------------
    "correct": "正确",
    "this check cannot run here: {reason}": "此检查无法在这里运行：{reason}",
    # lesson 00
    "a and b must be the square matrices of section 5a: run the cells above first":
        "a 和 b 必须是第 5a 节的方阵：请先运行上面的单元格",
    "Hint: assign both bf16_err and tol (floats)": "提示：请给 bf16_err 和 tol 都赋值（浮点数）",
    "Hint: bf16_err and tol must be Python floats: call .item() on a 0-d tensor":
        "提示：bf16_err 和 tol 必须是 Python 浮点数：对 0 维张量调用 .item()",
    "Hint: bf16_err is not the BF16 error of a @ b: cast both inputs with .bfloat16(), multiply, and compare with the FP64 product as ||out - ref|| / ||ref||":
        "提示：bf16_err 不是 a @ b 的 BF16 误差：先用 .bfloat16() 转换两个输入再相乘，然后与 FP64 乘积比较，即 ||out - ref|| / ||ref||",
    "Hint: bf16_err looks typed in (a round number, like a printed output): a measured error has many digits; compute it in the cell from a and b, so it follows your matrices and your machine":
        "提示：bf16_err 看起来是手工填入的（一个整齐的数，像是抄自打印的输出）：实测误差有很多位有效数字；请在单元格里由 a 和 b 计算它，让它随你的矩阵和你的机器而变",
    "Hint: your test fails a correct FP16 product (or passes it only by luck): tol must sit well above the FP16 error you measured in 5a (rel_err), which new matrices repeat only roughly":
        "提示：你的测试会把正确的 FP16 乘积判为不通过（或者只是侥幸通过）：tol 必须明显高于你在 5a 中测得的 FP16 误差（rel_err），换一组新矩阵，这个误差只能大致重现",
    "Hint: your test passes a BF16 product: tol must sit well below the BF16 error you measured":
        "提示：你的测试让 BF16 乘积也通过了：tol 必须明显低于你测得的 BF16 误差",
    "Hint: define a function pays_off(name) that returns True or False":
        "提示：定义一个函数 pays_off(name)，返回 True 或 False",
    "Hint: pays_off calls the lesson's acc16_cited, which repeats the lesson's answer: write the comparison yourself from each chip's peaks":
        "提示：pays_off 调用了课程自己的 acc16_cited，等于照搬课程的答案：请自己根据每个芯片的峰值写出比较",
    "Hint: pays_off({name!r}) raised {error}: it must answer for every chip name in PEAK_TFLOPS, from that chip's peaks":
        "提示：pays_off({name!r}) 抛出了 {error}：它必须能回答 PEAK_TFLOPS 中的每个芯片名称，依据是该芯片自己的峰值",
    "Hint: pays_off must return True or False": "提示：pays_off 必须返回 True 或 False",
    "Hint: pays_off says yes for {names}, whose cited FP16-accumulate peak equals the FP32-accumulate one (data-center parts run both at the same rate): compare fp16_acc16 with fp16, not with fp32, and count a tie as no gain":
        "提示：pays_off 对 {names} 回答“是”，但它们引用的 FP16 累加峰值与 FP32 累加峰值相同（数据中心 GPU 两种累加速度一样）：应比较 fp16_acc16 与 fp16，而不是与 fp32，持平不算收益",
    "Hint: pays_off says no for {names}, small chips whose cited FP16-accumulate peak is 2x the FP32-accumulate one: you compare a difference in TFLOP/s, which grows with the chip; a gain is a ratio of the two peaks":
        "提示：pays_off 对 {names} 回答“否”，但这些小芯片引用的 FP16 累加峰值是 FP32 累加峰值的 2 倍：你比较的是以 TFLOP/s 计的差值，它随芯片规模变大；收益应看两个峰值之比",
    "Hint: compare fp16_acc16 with fp16 in PEAK_TFLOPS for each chip: a bigger chip is not the question":
        "提示：对每个芯片比较 PEAK_TFLOPS 中的 fp16_acc16 和 fp16：问题不在芯片大小",
    "Hint: right for the chips in cards but wrong for {names}: your rule answers from a list of names or another field; decide from each chip's fp16_acc16 and fp16 instead":
        "提示：对 cards 中的芯片是对的，但对 {names} 错了：你的规则是按名单或别的字段作答；应改为依据每个芯片的 fp16_acc16 和 fp16 来判断",
    "Hint: pays_off says yes for {names}, a workstation Ada card whose cited FP16-accumulate peak equals its FP32-accumulate one: 'RTX' in a name does not tell; decide from fp16_acc16 and fp16":
        "提示：pays_off 对 {names} 回答“是”，但这是一块工作站 Ada 显卡，它引用的 FP16 累加峰值与 FP32 累加峰值相同：名称里有 'RTX' 说明不了什么；应依据 fp16_acc16 和 fp16 来判断",
    "Hint: pays_off says no for {names}, whose cited FP16-accumulate peak is 2x the FP32-accumulate one but rounded (330.3 vs 2 x 165.2): compare with a margin, not with an exact 2":
        "提示：pays_off 对 {names} 回答“否”，但它们引用的 FP16 累加峰值是 FP32 累加峰值的 2 倍，只是经过了舍入（330.3 对 2 × 165.2）：比较时要留余量，不要拿恰好 2 倍来比",
    "correct: your rule is right for every chip in PEAK_TFLOPS": "正确：你的规则对 PEAK_TFLOPS 中的每个芯片都成立",
    "room must be the dict of section 'Exercise 3' (name -> capability): run its cell first":
        "room 必须是练习 3 中的字典（名称 -> 计算能力）：请先运行那个单元格",
    "Hint: define a function recommend(name, capability) that returns 'bf16', 'fp16' or 'fp32'":
        "提示：定义一个函数 recommend(name, capability)，返回 'bf16'、'fp16' 或 'fp32'",
    "Hint: classroom must be a DataFrame with a 'recommended' column": "提示：classroom 必须是带 'recommended' 列的 DataFrame",
    "Hint: one row per GPU, indexed by the names in room": "提示：每块 GPU 一行，以 room 中的名称为索引",
    "Hint: use the values 'bf16', 'fp16', 'fp32'": "提示：取值只能是 'bf16'、'fp16'、'fp32'",
    "Hint: recommend({name!r}, {cap}) raised {error}: derive the answer from chip_features(capability, name), not from a table of room's GPUs":
        "提示：recommend({name!r}, {cap}) 抛出了 {error}：答案要由 chip_features(capability, name) 推出，而不是查 room 中 GPU 的对照表",
    "Hint: recommend must return 'bf16', 'fp16' or 'fp32'": "提示：recommend 必须返回 'bf16'、'fp16' 或 'fp32'",
    "Hint: recommend gives every GPU the same answer: torch.cuda.is_bf16_supported() and this machine's compute capability describe this machine's GPU, not the one in the row":
        "提示：recommend 给每块 GPU 的答案都一样：torch.cuda.is_bf16_supported() 和本机的计算能力描述的是本机的 GPU，而不是这一行的 GPU",
    "Hint: look again at {wrong}: did you pass the name to chip_features? GTX 16xx cards are sm_75 without Tensor Cores":
        "提示：再看看 {wrong}：你把名称传给 chip_features 了吗？GTX 16xx 显卡是 sm_75，但没有 Tensor Core",
    "Hint: recommend says bf16 for {wrong}, which have no native BF16 (it needs sm_80+): torch.cuda.is_bf16_supported() describes this machine's GPU (and says True where BF16 is only emulated), not the chip in the row":
        "提示：recommend 对 {wrong} 给出了 bf16，但它们没有原生 BF16（需要 sm_80+）：torch.cuda.is_bf16_supported() 描述的是本机的 GPU（而且在 BF16 只是模拟时也会返回 True），而不是这一行的芯片",
    "Hint: recommend says fp16 for {wrong}, which have native BF16: it starts at sm_80 itself (>=, not >); read it from chip_features(capability, name)":
        "提示：recommend 对 {wrong} 给出了 fp16，但它们有原生 BF16：它从 sm_80 本身开始（用 >=，不是 >）；请从 chip_features(capability, name) 读取",
    "Hint: look again at {wrong}: check bf16_native before fp16_tensor_cores (a chip with native BF16 also has FP16 Tensor Cores)":
        "提示：再看看 {wrong}：先检查 bf16_native，再检查 fp16_tensor_cores（有原生 BF16 的芯片也有 FP16 Tensor Core）",
    "Hint: recommend is wrong for {wrong}: derive it from chip_features(capability, name) for every GPU, including ones not in room":
        "提示：recommend 对 {wrong} 的答案不对：对每块 GPU（包括 room 之外的）都要由 chip_features(capability, name) 推出",
    "Hint: classroom disagrees with your recommend for {wrong}: build it by calling recommend on each GPU of room":
        "提示：classroom 在 {wrong} 上与你的 recommend 不一致：请对 room 中的每块 GPU 调用 recommend 来构建它",
    "correct: your tolerance passes FP16 and catches BF16 on new matrices": "正确：在新矩阵上，你的容差放过 FP16，拦下 BF16",
    "correct: native BF16 where the chip has it (for its range: no GradScaler), else FP16 with a GradScaler on Tensor Cores, else FP32":
        "正确：芯片有原生 BF16 就用 BF16（为了它的范围：不需要 GradScaler），否则在 Tensor Core 上用 FP16 加 GradScaler，再否则用 FP32",
    # lesson 01
    "Hint: assign a dict {name: 'fp16' | 'bf16' | 'fp32'} to storage":
        "提示：把一个字典 {name: 'fp16' | 'bf16' | 'fp32'} 赋给 storage",
    "Hint: storage needs one entry per name in ranges, keyed by those names":
        "提示：storage 要为 ranges 中的每个名称各有一项，以这些名称为键",
    "Hint: the values are the strings 'fp16', 'bf16' or 'fp32'": "提示：取值是字符串 'fp16'、'bf16' 或 'fp32'",
    "Hint: {lossy} would change values: range is not precision. A format reaches far beyond the integers it stores exactly; cast torch.arange to it and back":
        "提示：{lossy} 会改变数值：范围不等于精度。一种格式能表示的范围远大于它能精确存储的整数；把 torch.arange 转换过去再转回来试试",
    "Hint: {wasteful} fit a smaller (or, between the 16-bit two, the finer) format":
        "提示：{wasteful} 用更小的格式就够了（两种 16 位格式之间，选精度更高的那种）",
    "{name} is missing or empty: run section 6 first, it records the gradients":
        "{name} 不存在或为空：请先运行第 6 节，它会记录梯度",
    "Hint: assign max_scale, lost_at_max and static_enough": "提示：给 max_scale、lost_at_max 和 static_enough 赋值",
    "Hint: max_scale must be a power of two (1, 2, 4, ...): GradScaler multiplies by powers of two, which shift the exponent and round nothing":
        "提示：max_scale 必须是 2 的幂（1、2、4……）：GradScaler 乘的是 2 的幂，它只移动指数，不带来任何舍入",
    "Hint: at max_scale a gradient overflows fp16: either you doubled once too often (stop at the last scale that overflows nothing) or you left out param_grads":
        "提示：在 max_scale 下有梯度在 fp16 中上溢：要么你多加倍了一次（应停在最后一个没有任何上溢的缩放因子），要么你漏掉了 param_grads",
    "Hint: at max_scale gradients overflow fp16: double from 1 while cast_stats(...).overflow stays 0 on all the gradients":
        "提示：在 max_scale 下有梯度在 fp16 中上溢：从 1 开始加倍，只要 cast_stats(...).overflow 在全部梯度上仍为 0 就继续",
    "Hint: your decide gives the same answer for every set of gradients: it must compute the choice from cast_stats at each scale, not return a fixed one":
        "提示：你的 decide 对任何梯度集合都给出同一个答案：它必须根据每个缩放因子下 cast_stats 的结果算出选择，而不是返回一个固定值",
    "Hint: at max_scale some gradient overflows fp16: you doubled once too often; stop at the last scale that overflows nothing":
        "提示：在 max_scale 下有梯度在 fp16 中上溢：你多加倍了一次；应停在最后一个没有任何上溢的缩放因子",
    "Hint: at max_scale a parameter gradient overflows fp16: count overflow on all the gradients, param_grads as well as activation_grads":
        "提示：在 max_scale 下有参数梯度在 fp16 中上溢：统计上溢时要包括全部梯度，param_grads 和 activation_grads 都要算",
    "Hint: twice max_scale overflows nothing yet: keep doubling": "提示：max_scale 再翻一倍也还没有上溢：继续加倍",
    "Hint: lost_at_max is one number, a fraction between 0 and 1": "提示：lost_at_max 是一个数，介于 0 和 1 之间的比例",
    "Hint: lost_at_max is a fraction (0.01 means 1 %), not a percentage":
        "提示：lost_at_max 是比例（0.01 表示 1%），不是百分数",
    "Hint: divide by the non-zero gradients, not by all of them: the zeros (mostly ReLU's) were zero before the cast and cannot be lost":
        "提示：要除以非零梯度的个数，而不是全部梯度的个数：那些零（大多来自 ReLU）在转换之前就是零，谈不上丢失",
    "Hint: count all the gradients, param_grads as well as activation_grads":
        "提示：统计全部梯度，param_grads 和 activation_grads 都要算",
    "Hint: that is the share flushed with no scale before the cast: pass scale=max_scale to cast_stats, which multiplies in fp32 first (multiplying after casting to fp16 scales values already rounded to zero)":
        "提示：这是转换之前不做缩放时下溢为零的比例：要给 cast_stats 传入 scale=max_scale，它先在 fp32 中相乘（转换成 fp16 之后再乘，乘的是已经舍入为零的值）",
    "Hint: lost_at_max should be the share of the non-zero gradients that flush to zero at max_scale: cast_stats(...) has underflow and nonzero":
        "提示：lost_at_max 应是在 max_scale 下下溢为零的非零梯度所占的比例：cast_stats(...) 提供 underflow 和 nonzero",
    "Hint: static_enough is True or False": "提示：static_enough 是 True 或 False",
    "Hint: smallest_exact({n}) leaves out count - 1: the range runs from 0 up to count - 1, count integers in all":
        "提示：smallest_exact({n}) 漏掉了 count - 1：范围是从 0 到 count - 1，一共 count 个整数",
    "Hint: smallest_exact({n}) also tests count itself: the range stops before count (0 up to count - 1)":
        "提示：smallest_exact({n}) 把 count 本身也测了：范围在 count 之前结束（从 0 到 count - 1）",
    "Hint: define a function within_rule(share) that returns True or False":
        "提示：定义一个函数 within_rule(share)，返回 True 或 False",
    "Hint: within_rule({share}) raised {kind} ({message}): it takes one share, a fraction":
        "提示：within_rule({share}) 抛出了 {kind}（{message}）：它接收一个比例（小数形式）",
    "Hint: within_rule must return True or False, got {got!r}":
        "提示：within_rule 必须返回 True 或 False，实际返回的是 {got!r}",
    "Hint: within_rule gives the same answer for every share: compare the share with the rule's limit, do not return a fixed value":
        "提示：你的 within_rule 对任何比例都给出同一个答案：要把比例与规则的上限比较，而不是返回一个固定值",
    "Hint: within_rule answers the other way round: True means the share is within the rule":
        "提示：within_rule 的答案正好反了：True 表示这个比例在规则之内",
    "Hint: within_rule rejects a share of exactly 0.001: the rule says at most 0.1 %, the limit included":
        "提示：within_rule 拒绝了恰好为 0.001 的比例：规则是至多 0.1%，包括上限本身",
    "Hint: within_rule allows a share of {share}: 0.1 % is 0.001 as a fraction, not 0.1":
        "提示：within_rule 放过了 {share} 的比例：0.1% 写成比例是 0.001，而不是 0.1",
    "Hint: within_rule allows a share of {share}: more than the rule's 0.1 % flushed":
        "提示：within_rule 放过了 {share} 的比例：下溢为零的比例超过了规则的 0.1%",
    "Hint: within_rule rejects a share of {share}, which the 0.1 % rule allows":
        "提示：within_rule 拒绝了 {share} 的比例，而 0.1% 规则允许它",
    "Hint: static_enough is not what your within_rule says for lost_at_max: store within_rule(lost_at_max), do not type it":
        "提示：static_enough 不是你的 within_rule 对 lost_at_max 给出的答案：存入 within_rule(lost_at_max) 的结果，不要手写",
    "Hint: at max_scale an activation gradient overflows fp16: count overflow on all the gradients, activation_grads as well as param_grads":
        "提示：在 max_scale 下有激活值梯度在 fp16 中上溢：统计上溢时要包括全部梯度，activation_grads 和 param_grads 都要算",
    "Hint: lost_at_max is 0, yet some non-zero gradients flush at max_scale: count all the gradients (activation_grads as well as param_grads), scaled before the fp16 cast (scale=max_scale in cast_stats)":
        "提示：lost_at_max 为 0，但在 max_scale 下确有非零梯度下溢为零：要统计全部梯度（activation_grads 和 param_grads 都要算），并在转换成 fp16 之前缩放（在 cast_stats 中传入 scale=max_scale）",
    "Hint: count all the gradients, activation_grads as well as param_grads":
        "提示：统计全部梯度，activation_grads 和 param_grads 都要算",
    "Hint: a subnormal is stored, with fewer bits, not lost; only values that round to zero count as flushed":
        "提示：次正规数仍被存储（只是位数更少），并没有丢失；只有舍入为零的值才算下溢为零",
    "Hint: static_enough follows from lost_at_max and the 0.1 % rule: a larger scale would overflow, so what flushes at max_scale is lost at every scale":
        "提示：static_enough 由 lost_at_max 和 0.1% 规则决定：更大的缩放因子会上溢，所以在 max_scale 下下溢为零的值，在任何缩放因子下都会丢失",
    "Hint: your decide says bf16 for gradients that one scale fits: try every S = 2.0**k for k = 0 .. 40 (k is the exponent, not the scale), applied through cast_stats' scale= (multiplying after an fp16 cast scales zeros)":
        "提示：对于一个缩放因子就能容纳的梯度，你的 decide 却选了 bf16：要试遍 k = 0 .. 40 的每个 S = 2.0**k（k 是指数，不是缩放因子），并通过 cast_stats 的 scale= 施加（转换成 fp16 之后再乘，乘的是零）",
    "Hint: your decide says fp16 for gradients that no single scale fits: one scale must satisfy both conditions at once (no overflow and few flushed)":
        "提示：对于没有哪个缩放因子能容纳的梯度，你的 decide 却选了 fp16：必须是同一个缩放因子同时满足两个条件（没有上溢，且下溢为零的很少）",
    "Hint: your decide says fp16 for gradients that overflow fp16 at every scale: a scale must leave no value overflowing":
        "提示：对于在任何缩放因子下都会在 fp16 中上溢的梯度，你的 decide 却选了 fp16：缩放因子不能让任何值上溢",
    "Hint: your decide says bf16 where at most 0.1 % of the non-zero values flush: the rule allows that many, it does not ask for none":
        "提示：非零值中下溢为零的不超过 0.1%，你的 decide 却选了 bf16：规则允许这么多，并不要求一个都不丢",
    "Hint: your decide says bf16 where exactly 0.1 % of the non-zero values flush: the rule says at most 0.1 %, so that share is allowed":
        "提示：非零值中恰好 0.1% 下溢为零，你的 decide 却选了 bf16：规则是至多 0.1%，所以这个比例是允许的",
    "Hint: your decide allows too many flushed values: 0.1 % is 0.001 as a fraction":
        "提示：你的 decide 放过了太多下溢为零的值：0.1% 写成比例是 0.001",
    "Hint: your decide counts the flushed values against all values: divide by the non-zero ones (the zeros were zero before the cast and cannot be lost)":
        "提示：你的 decide 用全部值作分母来计算下溢为零的比例：应除以非零值的个数（那些零在转换之前就是零，谈不上丢失）",
    "Hint: define a function decide(grads) that returns 'fp16' or 'bf16'":
        "提示：定义一个函数 decide(grads)，返回 'fp16' 或 'bf16'",
    "Hint: assign choice_a, choice_b (each 'fp16' or 'bf16') and best_scale_a (a power of two)":
        "提示：给 choice_a、choice_b（各为 'fp16' 或 'bf16'）和 best_scale_a（2 的幂）赋值",
    "Hint: decide raised {kind} ({message}) on a tensor of gradients: it takes one tensor and returns 'fp16' or 'bf16'":
        "提示：decide 在一个梯度张量上抛出了 {kind}（{message}）：它接收一个张量，返回 'fp16' 或 'bf16'",
    "Hint: decide must return the string 'fp16' or 'bf16', got {got!r}":
        "提示：decide 必须返回字符串 'fp16' 或 'bf16'，实际返回的是 {got!r}",
    "Hint: {name} is not what your decide returns for its gradients: store decide(...)'s result, do not type it":
        "提示：{name} 不是你的 decide 对相应梯度返回的结果：请保存 decide(...) 的返回值，不要手写",
    "Hint: best_scale_a is a power of two": "提示：best_scale_a 是 2 的幂",
    "Hint: at best_scale_a something overflows: you doubled once too often": "提示：在 best_scale_a 下有值上溢：你多加倍了一次",
    "Hint: twice best_scale_a still overflows nothing": "提示：best_scale_a 翻倍后仍然没有上溢",
    "correct: decide follows the rule on gradients it never saw, and the scale is the largest that fits":
        "正确：decide 在从未见过的梯度上也遵循规则，缩放因子也是不上溢的最大值",
    "Hint: define a function smallest_exact(count) that returns 'fp16', 'bf16' or 'fp32'":
        "提示：定义一个函数 smallest_exact(count)，返回 'fp16'、'bf16' 或 'fp32'",
    "Hint: smallest_exact({n}) raised {kind} ({message}): it takes one integer count":
        "提示：smallest_exact({n}) 抛出了 {kind}（{message}）：它接收一个整数 count",
    "Hint: smallest_exact must return the string 'fp16', 'bf16' or 'fp32', got {got!r}":
        "提示：smallest_exact 必须返回字符串 'fp16'、'bf16' 或 'fp32'，实际返回的是 {got!r}",
    "Hint: smallest_exact(4097) says fp16, but some integer below 4097 does not survive the round trip: compare every integer of torch.arange(count), not only the largest":
        "提示：smallest_exact(4097) 给出了 fp16，但 4097 以下有整数经过往返转换后变了：要比较 torch.arange(count) 的每个整数，而不只是最大的那个",
    "Hint: smallest_exact({n}) would change values: range is not precision. A format reaches far beyond the integers it stores exactly; cast torch.arange to it and back":
        "提示：smallest_exact({n}) 会改变数值：范围不等于精度。一种格式能表示的范围远大于它能精确存储的整数；把 torch.arange 转换过去再转回来试试",
    "Hint: smallest_exact(2048) picks a larger format than needed: a normal number's mantissa has an implicit leading 1, one bit more than it stores":
        "提示：smallest_exact(2048) 选了比需要更大的格式：正规数的尾数有一个隐含的前导 1，比存储的位数多一位",
    "Hint: smallest_exact({n}) is larger than needed: take fp16 over bf16 when both store every value, and a 16-bit format over fp32":
        "提示：smallest_exact({n}) 选的格式比需要的大：两种 16 位格式都能精确存储时选 fp16 而不是 bf16，16 位格式够用时不选 fp32",
    "correct: smallest_exact holds on counts you never saw, and storage follows from it":
        "正确：smallest_exact 在你没见过的 count 上也成立，storage 也由它得出",
    "Hint: lost_at_max is 0, yet some non-zero gradients flush at max_scale: scale before the fp16 cast (scale=max_scale in cast_stats); values cast first are already zero and no longer counted":
        "提示：lost_at_max 是 0，但在 max_scale 下确有非零梯度下溢为零：要在转换成 fp16 之前缩放（在 cast_stats 中用 scale=max_scale）；先转换的值已经是零，不再被计入",
    "Hint: your decide says bf16 for gradients that one scale fits: a subnormal is stored, with fewer bits, not lost; only values that round to zero count as flushed":
        "提示：对于一个缩放因子就能容纳的梯度，你的 decide 却选了 bf16：次正规数仍被存储（只是位数更少），并没有丢失；只有舍入为零的值才算下溢为零",
    "Hint: your decide says bf16 for gradients that a large scale fits: try the scales all the way up to 2^40":
        "提示：对于一个较大的缩放因子就能容纳的梯度，你的 decide 却选了 bf16：缩放因子要一直试到 2^40",
    "Hint: your decide says fp16 for every set of gradients, even ones no scale fits: apply S through cast_stats' scale= before the fp16 cast (values cast first are already zero and no longer counted), and compute the choice, do not return a fixed one":
        "提示：你的 decide 对任何梯度集合都选 fp16，连没有缩放因子能容纳的也不例外：要在转换成 fp16 之前通过 cast_stats 的 scale= 施加 S（先转换的值已经是零，不再被计入），并且要算出选择，而不是返回固定值",
    # lesson 02
    "Hint: assign your corrected training function itself (not its result) to amp_train":
        "提示：把修正后的训练函数本身（不是它的返回值）赋给 amp_train",
    "Hint: amp_train must return the trained model": "提示：amp_train 必须返回训练后的模型",
    "Hint: your weights are not float32: keep the master weights in fp32 and let autocast cast the layers":
        "提示：你的权重不是 float32：主权重保持 fp32，由 autocast 去转换各层",
    "Hint: the weights did not change: are the gradients cleared between backward() and scaler.step()? Clear them at the start of a step (or after the previous update), never between backward() and step()":
        "提示：权重没有变化：是不是在 backward() 和 scaler.step() 之间清空了梯度？清空梯度要放在一步开始时（或上一步更新之后），不能夹在 backward() 和 step() 之间",
    "it needs at least two batches in ex_batches: run the cell above the exercise":
        "它需要 ex_batches 里至少有两个批次：先运行练习上面的单元格",
    "unscale_ and the clip go before scaler.step(optimizer): step already unscales and applies the gradients, so clipping after it changes nothing this step":
        "unscale_ 和裁剪要放在 scaler.step(optimizer) 之前：step 已经反缩放并应用了梯度，之后再裁剪对这一步毫无作用",
    "scaler.update() must follow every scaler.step(optimizer): it readies the scaler for the next step":
        "每次 scaler.step(optimizer) 之后都必须调用 scaler.update()：它根据本步是否上溢调整缩放因子，为下一步做好准备",
    "Hint: the loss is not multiplied by an enabled GradScaler once per step: without scaler.scale(loss).backward(), small fp16 gradients underflow to zero":
        "提示：损失没有在每一步都经过一个启用的 GradScaler 放大：没有 scaler.scale(loss).backward()，较小的 fp16 梯度会下溢为零",
    "Hint: call scaler.update() once per step, after scaler.step(optimizer): without it the scale never adapts":
        "提示：每一步在 scaler.step(optimizer) 之后调用一次 scaler.update()：没有它，缩放因子永远不会调整",
    "Hint: the gradients are not cleared every step: backward() adds to .grad, so each update also carries the earlier steps' gradients":
        "提示：梯度没有每一步清空：backward() 会累加到 .grad 上，于是每次更新都带着之前各步的梯度",
    "Hint: the updates are thousands of times too small: the clipping saw gradients still multiplied by the loss scale":
        "提示：更新量小了几千倍：梯度裁剪看到的梯度仍乘着损失缩放因子",
    "Hint: the updates are larger than clipped ones: the clipping did not act on the gradients the optimizer used":
        "提示：更新量比裁剪后的大：梯度裁剪没有作用在优化器所用的梯度上",
    "Hint: close, but not the same updates: are the forward pass and the loss both inside the fp16 autocast block, and your calls in section 2's order?":
        "提示：很接近，但更新量不一样：前向传播和损失是否都在 fp16 的 autocast 块里？调用顺序是否与第 2 节一致？",
    "Hint: the forward pass does not run under torch.autocast(device_type=..., dtype=torch.float16) in every step: without it, or with bfloat16, the layers do not compute in fp16":
        "提示：前向传播没有在每一步都运行在 torch.autocast(device_type=..., dtype=torch.float16) 之下：没有它，或者用了 bfloat16，各层就不以 fp16 计算",
    "Hint: the optimizer does not use the learning rate passed in: SGD(..., lr=lr), not a number typed in":
        "提示：优化器没有使用传入的学习率：应写 SGD(..., lr=lr)，而不是手写的数字",
    "Hint: the gradients are never clipped: call torch.nn.utils.clip_grad_norm_ after scaler.unscale_(optimizer)":
        "提示：梯度从未被裁剪：在 scaler.unscale_(optimizer) 之后调用 torch.nn.utils.clip_grad_norm_",
    "Hint: wrong clip threshold: clip to max_norm, the function's argument, not a number typed in":
        "提示：裁剪阈值不对：裁剪到函数参数 max_norm，而不是手写的数字",
    "Hint: h_probe should be the History that fit returned": "提示：h_probe 应该是 fit 返回的 History",
    "Hint: train for 20 steps (steps=20)": "提示：训练 20 步（steps=20）",
    "Hint: the scaler did not start at 2**22: pass scaler=torch.amp.GradScaler(device.type, init_scale=2.0**22)":
        "提示：缩放器不是从 2**22 开始的：传入 scaler=torch.amp.GradScaler(device.type, init_scale=2.0**22)",
    "Hint: the first step was not skipped: is the scaler starting at 2**22, in fp16?":
        "提示：第一步没有被跳过：缩放器是从 2**22 开始的吗？用的是 fp16 吗？",
    "Hint: every step was skipped: the scale did not get low enough in 20 steps": "提示：每一步都被跳过了：20 步内缩放因子没有降到足够低",
    "Hint: assign the step number itself, an int, to first_applied (not a Series or a row: int(...iloc[0]))":
        "提示：把步号本身（一个 int）赋给 first_applied（不是 Series 或一行：int(...iloc[0])）",
    "Hint: one step too early: that step was still skipped. The 'step' column counts from 1 (the row index from 0), and a count of skipped steps is not a step number":
        "提示：早了一步：那一步仍被跳过。'step' 列从 1 开始计数（行索引从 0 开始），被跳过的步数也不是步号",
    "Hint: not that step: steps are numbered from 1 (the 'step' column, not the row index), and a skipped step has skipped=True":
        "提示：不是这一步：步号从 1 开始（看 'step' 列，不是行索引），被跳过的步 skipped=True",
    "correct: your loop trains exactly as the recipe of section 2": "正确：你的训练循环与第 2 节的方案训练结果完全一致",
    "correct: the scaler halved its scale on every overflow until the gradients fit in fp16":
        "正确：每次上溢缩放器都把缩放因子减半，直到梯度能放进 fp16",
    "Hint: define both functions, save_state and load_state, and run their cell":
        "提示：定义 save_state 和 load_state 两个函数，并运行它们所在的单元格",
    "the exercise folder {folder} is gone: run the cell above the exercise again":
        "练习用的文件夹 {folder} 已不存在：重新运行练习上面的单元格",
    "your save_state raised {kind}: {err}": "你的 save_state 抛出了 {kind}：{err}",
    "Hint: save_state wrote nothing to the path it was given: torch.save(..., path)":
        "提示：save_state 没有向给它的路径写入任何东西：torch.save(..., path)",
    "Hint: torch.load(weights_only=True) loads tensors and plain containers only: save the state_dict()s, not the objects":
        "提示：torch.load(weights_only=True) 只加载张量和普通容器：保存各个 state_dict()，而不是对象本身",
    "run your functions yourself on ex_ckpt and read where they fail": "自己在 ex_ckpt 上运行你的函数，看它们在哪里出错",
    "resuming raised {kind}: {err}. Hint: {hint}": "恢复时抛出了 {kind}：{err}。提示：{hint}",
    "Hint: load_state must return the step the checkpoint was saved at, an int":
        "提示：load_state 必须返回保存检查点时的步号（一个 int）",
    "Hint: load_state returned another step than the one saved with the state: return the saved step itself (the loop continues from the next one)":
        "提示：load_state 返回的步号与随状态一起保存的不同：返回保存的那个步号本身（循环会从下一步继续）",
    "Hint: the weights after load_state are not the saved ones: save model.state_dict() and load it back":
        "提示：load_state 之后的权重不是保存的那些：保存 model.state_dict() 并把它加载回来",
    "Hint: the optimizer's state (Adam's moments and step count) was not restored: save optimizer.state_dict() and load it back":
        "提示：优化器的状态（Adam 的矩估计和步数）没有恢复：保存 optimizer.state_dict() 并把它加载回来",
    "Hint: the scaler's state (its scale and growth tracker) was not restored: a checkpoint must hold scaler.state_dict(), loaded back with scaler.load_state_dict":
        "提示：缩放器的状态（缩放因子和增长计数）没有恢复：检查点必须包含 scaler.state_dict()，并用 scaler.load_state_dict 加载回来",
    "Hint: load with torch.load(path, weights_only=True): weights_only=False can run code from the file; save the state_dict()s, which load without it":
        "提示：用 torch.load(path, weights_only=True) 加载：weights_only=False 可能执行文件里的代码；保存各个 state_dict()，它们不需要它就能加载",
    "Hint: the state after load_state is right but the run ends elsewhere: did save_state save the state of the step it was given?":
        "提示：load_state 之后的状态是对的，但运行结束时的结果不同：save_state 保存的是它收到的那一步的状态吗？",
    "correct: the resumed run ends bit for bit where a run that never crashed ends":
        "正确：恢复后的训练与从未中断的训练，结果逐位相同",
    "GradScaler cannot unscale fp16 gradients: the weights must stay fp32 (autocast runs the layers in fp16)":
        "GradScaler 无法对 fp16 梯度做反缩放：权重必须保持 fp32（由 autocast 以 fp16 运行各层）",
    "run your loop on ex_batches yourself and read where it fails": "自己在 ex_batches 上运行你的循环，看它在哪里出错",
    "your loop raised {kind}: {err}. Hint: {hint}": "你的循环抛出了 {kind}：{err}。提示：{hint}",
    # lesson 03
    "Hint: assign fixed (the padded copy), fixed_opt (its optimizer) and must_change (a set)":
        "提示：给 fixed（填充后的副本）、fixed_opt（它的优化器）和 must_change（一个集合）赋值",
    "Hint: fixed must be a padded *copy* (copy.deepcopy); unseen stays as it is":
        "提示：fixed 必须是填充后的*副本*（copy.deepcopy）；unseen 保持原样",
    "Hint: unseen itself was changed: pad a copy": "提示：unseen 本身被改了：请填充一个副本",
    "Hint: something paddable is left: {names} (audit(fixed).pad_names())":
        "提示：还剩可填充的层：{names}（audit(fixed).pad_names()）",
    "Hint: fixed computes something else: pad with pad_layers (it slices padded outputs back)":
        "提示：fixed 的计算结果变了：用 pad_layers 填充（它会把填充后的输出切回原来的大小）",
    "Hint: fixed_opt does not hold fixed's parameters: build the optimizer after padding":
        "提示：fixed_opt 持有的不是 fixed 模型的参数：填充之后再构建优化器",
    "Hint: must_change is off: only the findings pad_layers cannot fix (the audit's paddable column is False) need a change of the model's definition":
        "提示：must_change 不对：只有 pad_layers 修不了的问题（audit 的 paddable 列为 False）才需要改模型定义",
    "Hint: must_change holds module names: give (module, dim) pairs, the audit's module and dim columns":
        "提示：must_change 里是模块名：请给出 (module, dim) 对，即 audit 的 module 列和 dim 列",
    "Hint: must_change is empty, but padding does not fix everything: audit(fixed) still lists a misaligned size that pad_layers cannot pad":
        "提示：must_change 是空的，但填充并不能修好一切：audit(fixed) 仍列出一个 pad_layers 无法填充的未对齐尺寸",
    "Hint: must_change holds findings pad_layers can pad (their paddable column is True): only the others need a change of the model's definition":
        "提示：must_change 里有 pad_layers 能填充的问题（它们的 paddable 列为 True）：只有其余的问题才需要改模型定义",
    "Hint: needs_fix must be a function of (model, card) returning a set, e.g. needs_fix(mlp, PROFILES['t4']); got {kind}":
        "提示：needs_fix 必须是一个以 (model, card) 为参数、返回集合的函数，例如 needs_fix(mlp, PROFILES['t4'])；现在是 {kind}",
    "Hint: needs_fix(mlp, PROFILES[{card!r}]) raised {err}": "提示：needs_fix(mlp, PROFILES[{card!r}]) 抛出了 {err}",
    "Hint: needs_fix must return a set of (module, dim) pairs, e.g. {example}; got {kind}":
        "提示：needs_fix 必须返回 (module, dim) 对的集合，例如 {example}；现在是 {kind}",
    "Hint: needs_fix is right for mlp on these two cards but not for a card or model it was not shown: decide the precision from card.capability (chip_features) and audit the model passed in; do not type the sets or the cards":
        "提示：needs_fix 对这两张卡上的 mlp 是对的，但换一张没见过的卡或一个没见过的模型就不对了：根据 card.capability（chip_features）"
        "决定精度，并审查传进来的模型；不要把集合或卡名直接写死",
    "Hint: layout is one of {cl!r} or 'NCHW' (the table's variant names)":
        "提示：layout 取 {cl!r} 或 'NCHW'（表中 variant 列的名称）",
    "Hint: the measurement favours the other layout: compare gpu_kernel_ms of the two rows":
        "提示：测量结果支持另一种布局：比较这两行的 gpu_kernel_ms",
    "Hint: kernel_gain must be a positive number (a ratio of two times), got {got!r}":
        "提示：kernel_gain 必须是一个正数（两个时间之比），现在是 {got!r}",
    "Hint: kernel_gain is off: it does not match the two rows' median kernel times (check the rows and the column you used)":
        "提示：kernel_gain 不对：它与这两行核函数时间的中位数不符（检查你用的行和列）",
    "Hint: that is the relative gain (the ratio minus 1): give the ratio itself":
        "提示：这是相对收益（比值减 1）：请给出比值本身",
    "Hint: that looks like a percentage: kernel_gain is a plain ratio, not in %":
        "提示：这看起来是百分数：kernel_gain 是一个普通的比值，不用 %",
    "Hint: choose_layout(measured) raised {err}": "提示：choose_layout(measured) 抛出了 {err}",
    "Hint: choose_layout must return a pair (layout, kernel_gain); got {got!r:.80}":
        "提示：choose_layout 必须返回一对值 (layout, kernel_gain)；现在是 {got!r:.80}",
    "Hint: choose_layout must be a function of measured returning (layout, kernel_gain); got {kind}":
        "提示：choose_layout 必须是一个以 measured 为参数、返回 (layout, kernel_gain) 的函数；现在是 {kind}",
    "Hint: choose_layout is right for this table but not for another one (the check swaps the two rows): compute layout and kernel_gain from the table passed in; do not type them":
        "提示：choose_layout 对这张表是对的，换一张表就不对了（检查把这两行对调了）：请根据传入的表计算 layout 和 kernel_gain，不要直接写死",
    "Hint: that is the ratio of the means over the rounds: take the median of each row":
        "提示：这是各轮平均值之比：每一行请取中位数",
    "Hint: fixed is padded to TF32's multiple (4), but the exercise audits for fp16: its multiple is 8":
        "提示：fixed 按 TF32 的倍数（4）填充了，但本练习按 fp16 审查：它的倍数是 8",
    "Hint: must_change is a set of (module, dim) pairs, e.g. {('layer', 'in_features')}":
        "提示：must_change 是 (module, dim) 对的集合，例如 {('layer', 'in_features')}",
    "correct: the copy is padded, computes the same, its optimizer holds the new parameters":
        "正确：副本已填充，计算结果不变，优化器持有新参数",
    "Hint: {card}: not the audit's findings: audit(model, precision=...) with the card's precision, then its (module, dim) pairs":
        "提示：{card}：这不是 audit 的结果：用这张卡的精度调用 audit(model, precision=...)，再取其中的 (module, dim) 对",
    "correct: the alignment a card needs follows from the precision it runs": "正确：一张卡需要的对齐取决于它运行的精度",
    "section 10 left measured as None (no GPU here and no committed reference found): the check needs its ResNet-50 kernel times":
        "第 10 节的 measured 是 None（本机没有 GPU，也没有找到提交的参考结果）：这个检查需要其中 ResNet-50 的核函数时间",
    "measured is not section 10's table (it needs the columns section, variant and gpu_kernel_ms)":
        "measured 不是第 10 节的表（它需要 section、variant 和 gpu_kernel_ms 这几列）",
    "section 10's table has no kernel times for the NCHW and channels_last ResNet-50 rows":
        "第 10 节的表里没有 NCHW 和 channels_last 两行 ResNet-50 的核函数时间",
    "Hint: that is the step's wall-time (images/s) ratio: on a host-bound step it shows only part of the kernels' gain; use gpu_kernel_ms":
        "提示：这是训练步墙钟时间（images/s）的比值：训练步主机端受限时，它只体现核函数加速的一部分；请用 gpu_kernel_ms",
    "Hint: kernel_gain is upside down: channels_last's time over NCHW's":
        "提示：kernel_gain 颠倒了：这是 channels_last 的时间除以 NCHW 的时间",
    "correct: the layout and the kernel-time evidence for it": "正确：布局选对了，核函数时间也支持它",
    "{sm} has TF32 (Ampere and newer), so the FP32 model runs TF32 there: multiples of 4":
        "{sm} 支持 TF32（Ampere 及更新的架构），所以 FP32 模型在那里以 TF32 运行：4 的倍数",
    "{sm} has no TF32 (it came with Ampere), so this card trains in FP16 autocast: multiples of 8":
        "{sm} 没有 TF32（它随 Ampere 才出现），所以这张卡用 FP16 autocast 训练：8 的倍数",
    "Hint: {card}: that is the {other} audit, but {why}": "提示：{card}：这是 {other} 下的 audit 结果，但 {why}",
    # lesson 04
    "Hint: assign both first_bad and safe_model": "提示：请给 first_bad 和 safe_model 都赋值",
    "Hint: first_bad must be a module name (a string such as 'inp')": "提示：first_bad 必须是模块名（例如 'inp' 这样的字符串）",
    "Hint: {first_bad!r} is not a module of ex1_model: read report.first":
        "提示：{first_bad!r} 不是 ex1_model 的模块：看 report.first",
    "Hint: {first_bad!r} is not the first module whose output overflows: look at the first row with inf/NaN in first_nonfinite's table":
        "提示：{first_bad!r} 不是第一个输出上溢的模块：看 first_nonfinite 表中第一个出现 inf/NaN 的行",
    "Hint: safe_model must be an nn.Module (e.g. a subclass of Ex1Net with a new forward)":
        "提示：safe_model 必须是 nn.Module（例如重写了 forward 的 Ex1Net 子类）",
    "Hint: safe_model's output still holds inf/NaN under FP16 autocast: the island must start before the layer that overflows and end after the values are small again":
        "提示：在 FP16 autocast 下 safe_model 的输出仍有 inf/NaN：FP32 孤岛必须在上溢的层之前开始，在数值重新变小之后结束",
    "Hint: safe_model's output is far from ex1_model's FP32 output: did you copy the weights?":
        "提示：safe_model 的输出与 ex1_model 的 FP32 输出相差很远：你复制权重了吗？",
    "Hint: safe_model has ex1_model's weights, but its output is far from ex1_model's FP32 output: its forward computes something other than Ex1Net.forward (a step left out?)":
        "提示：safe_model 用的是 ex1_model 的权重，但它的输出与 ex1_model 的 FP32 输出相差很远：它的 forward 算的不是 Ex1Net.forward 的内容（漏了一步？）",
    "Hint: safe_model has no layer with {name}'s weights: build it from ex1_model's layers (copy its state_dict)":
        "提示：safe_model 中没有一层带有 {name} 的权重：用 ex1_model 的层来构建（复制它的 state_dict）",
    "Hint: {name} itself runs in {dtype}: this exercise asks for an FP32 island, the layer that overflows running in FP32 (other fixes, such as rescaling or bf16, are section 1's)":
        "提示：{name} 本身以 {dtype} 运行：本练习要求的是 FP32 孤岛，即上溢的那一层以 FP32 运行（重新缩放、bf16 等其他修复属于第 1 节）",
    "Hint: safe_model's forward raised {error}":
        "提示：safe_model 的 forward 抛出了 {error}",
    "Hint: nothing runs in FP16 any more: keep autocast on outside the island":
        "提示：已经没有任何部分以 FP16 运行：孤岛之外要保持 autocast 开启",
    "Hint: assign a threshold (a positive float) to max_norm": "提示：把一个阈值（正浮点数）赋给 max_norm",
    "Hint: max_norm must be a positive, finite number": "提示：max_norm 必须是有限的正数",
    "Hint: without clipping, explosion_run no longer explodes on seeds {seeds}: the threshold is judged on section 4's run, so re-run its cell unchanged (learning rate, data, explode_steps) and change only max_norm":
        "提示：不裁剪时，explosion_run 在种子 {seeds} 上都不再发散：阈值要在第 4 节的训练上评判，"
        "所以请原样重新运行那个单元（学习率、数据、explode_steps 都不改），只改 max_norm",
    "Hint: on seed {seed} the run still explodes with that threshold and fit stops it: clip lower":
        "提示：在种子 {seed} 上，用这个阈值训练仍然发散，被 fit 中止：把裁剪阈值调低",
    "Hint: on seed {seed} the run finishes, but on the way its loss rose to {peak:.0f}× that of the first steps: an explosion the threshold let through; clip lower":
        "提示：在种子 {seed} 上，训练跑完了，但途中损失升到了最初几步的 {peak:.0f} 倍：阈值放过了一次爆炸；把裁剪阈值调低",
    "Hint: on seed {seed} the run finishes but does not learn: the threshold lets too large updates through; look at the loss of each step":
        "提示：在种子 {seed} 上，训练跑完了，但没有学到东西：阈值放过了过大的更新；看看每一步的损失",
    "Hint: on seed {seed} the threshold acts on {share:.0%} of the applied steps, more than 60 %: it caps most updates (a brake, not a safety net): compare it with the gradient norms of the steps that were not clipped":
        "提示：在种子 {seed} 上，阈值在 {share:.0%} 的已应用步上起作用，超过了 60%：它限制了大部分更新（成了刹车，而不是安全网）：把它和未被裁剪的那些步的梯度范数比一比",
    "Hint: assign your autograd.Function class to SafeSumSquares": "提示：把你的 autograd.Function 类赋给 SafeSumSquares",
    "Hint: SafeSumSquares must be a subclass of torch.autograd.Function":
        "提示：SafeSumSquares 必须是 torch.autograd.Function 的子类",
    "Hint: SafeSumSquares.apply raised {error}": "提示：SafeSumSquares.apply 抛出了 {error}",
    "Hint: forward must return one tensor with one value per row": "提示：forward 必须返回一个张量，每行一个值",
    "Hint: the output still overflows: in which dtype does x reach forward, and in which dtype does x * x run?":
        "提示：输出仍然上溢：x 以什么 dtype 进入 forward？x * x 又以什么 dtype 计算？",
    "Hint: the output is {dtype}: the math must run in FP32 inside the function":
        "提示：输出是 {dtype}：函数内部的计算必须以 FP32 进行",
    "Hint: the values are wrong: the forward must compute the same math as SumSquares":
        "提示：数值不对：forward 的计算必须与 SumSquares 相同",
    "Hint: the backward computes in {dtype}: the gradient's math must run in FP32 too (the tensors it uses: as forward received them, in FP32)":
        "提示：backward 以 {dtype} 计算：梯度的计算也必须以 FP32 进行（它用到的张量：按 forward 收到时的样子，即 FP32）",
    "Hint: backward raised {error}": "提示：backward 抛出了 {error}",
    "Hint: the gradient is not finite: in which dtype does backward compute?":
        "提示：梯度不是有限值：backward 以什么 dtype 计算？",
    "Hint: the gradient ignores the upstream gradient that backward receives: a backward returns (its local derivative) × (the incoming grad)":
        "提示：梯度忽略了 backward 收到的上游梯度：backward 应返回（局部导数）×（传入的梯度）",
    "Hint: the gradient is off by a constant factor ({ratio:.3g}×): differentiate the forward again":
        "提示：梯度差了一个常数倍（{ratio:.3g}×）：重新对 forward 求导",
    "Hint: the gradient does not match autograd's gradient of the same math: compare your backward with torch.autograd.grad on an FP32 copy":
        "提示：梯度与 autograd 对同一计算求出的梯度不一致：在一份 FP32 副本上用 torch.autograd.grad 与你的 backward 比较",
    "the activations do not overflow FP16 when squared (was ex3_layer or ex3_x changed?)":
        "激活值平方后没有超出 FP16 的范围（ex3_layer 或 ex3_x 被改过吗？）",
    "no layer of the model overflows FP16 on this input (was ex1_model or ex1_x changed?)":
        "在这个输入上，模型没有任何一层超出 FP16 的范围（ex1_model 或 ex1_x 被改过吗？）",
    "Hint: safe_model's forward raised {error}: inside autocast(enabled=False) nothing is cast for you":
        "提示：safe_model 的 forward 抛出了 {error}：在 autocast(enabled=False) 内部，没有任何东西会替你转换 dtype",
    "Hint: {names} run in FP32 but never see values near FP16's limit: start the island at the layer that overflows and end it once the values are small again":
        "提示：{names} 以 FP32 运行，但它们的数值从未接近 FP16 的上限：FP32 孤岛应从上溢的层开始，在数值重新变小后结束",
    "correct: the overflowing layer runs in FP32, the rest in FP16": "正确：上溢的层以 FP32 运行，其余以 FP16 运行",
    "correct: a safety net that stops the explosion and lets the run learn": "正确：这是一张安全网，既挡住了梯度爆炸，又让训练能学习",
    "correct: FP32 inside the function, finite output and gradient": "正确：函数内部用 FP32，输出和梯度都是有限值",
    # lesson 05
    "Hint: micro_batch and accum_steps are positive ints": "提示：micro_batch 和 accum_steps 是正整数",
    "Hint: micro_batch × accum_steps must be the effective batch, {target}: pick a micro-batch that divides it":
        "提示：micro_batch × accum_steps 必须等于有效批处理大小 {target}：选一个能整除它的微批次",
    "Hint: that micro-batch did not fit: read the fp16 rows with ok=True": "提示：这个微批次放不下：看 ok=True 的 fp16 行",
    "Hint: a larger micro-batch that divides {target} fits too, and fewer micro-batches per step are faster":
        "提示：还有更大的、能整除 {target} 的微批次也放得下，而每步的微批次越少越快",
    "Hint: assign your function (x -> tensor) to normalise_lean": "提示：把你的函数（x -> 张量）赋给 normalise_lean",
    "Hint: normalise_lean changed its input: the caller still needs x": "提示：normalise_lean 改动了它的输入：调用方还要用 x",
    "Hint: the values differ from normalise(x)": "提示：数值与 normalise(x) 不同",
    "Hint: normalise_lean allocated {used:.1f} times its input's size: create one new tensor, then update it with in-place ops (their names end in an underscore)":
        "提示：normalise_lean 分配了输入大小的 {used:.1f} 倍：只新建一个张量，再用原地操作（名称以下划线结尾）更新它",
    "Hint: assign your function (x, w -> tensor) to gated_fixed": "提示：把你的函数（x, w -> 张量）赋给 gated_fixed",
    "Hint: the values differ from h * sigmoid(h)": "提示：数值与 h * sigmoid(h) 不同",
    "Hint: the gradient for w is wrong: does every path from w to the output keep its gradient (no .detach())?":
        "提示：w 的梯度不对：从 w 到输出的每条路径都保留了梯度吗（没有 .detach()）？",
    "no max-batch search here (no GPU and no committed reference): fits.frame is None":
        "这里没有最大批处理大小的搜索结果（没有 GPU，也没有已提交的参考结果）：fits.frame 是 None",
    "pass the search's table, fits.frame (columns precision, batch_size, ok)":
        "请传入搜索结果表 fits.frame（列为 precision、batch_size、ok）",
    "Hint: that is what fits in {precision}; you train in FP16 AMP: read the fp16 rows":
        "提示：这是 {precision} 下放得下的大小；你用的是 FP16 AMP 训练：看 fp16 行",
    "Hint: normalise_lean returns {got}, its input is {want}: keep the input's dtype":
        "提示：normalise_lean 返回的是 {got}，输入是 {want}：保持输入的 dtype",
    "Hint: some values lie beyond ±3: the clamp is missing": "提示：有些值超出了 ±3：少了 clamp",
    "Hint: the values are off by a constant factor per row: compute the standard deviation as normalise does "
    "(torch's default correction)":
        "提示：每一行的数值都差一个固定倍数：标准差要按 normalise 的算法来算（torch 默认的 correction）",
    "Hint: the output does not require grad: torch.no_grad() or .detach() cut w out of the graph, so there is no "
    "backward pass to run":
        "提示：输出不需要梯度：torch.no_grad() 或 .detach() 把 w 从计算图里切掉了，因此没有反向传播可做",
    "correct: the largest micro-batch that fits, accumulated to the effective batch": "正确：放得下的最大微批次，累积到有效批处理大小",
    "correct: {used:.2f} times the input's size": "正确：输入大小的 {used:.2f} 倍",
    "correct: the same values, and autograd can run the backward pass": "正确：数值相同，autograd 也能完成反向传播",
    "Hint: the backward pass fails ({err}...): which tensor does sigmoid's backward need, and who changes it?":
        "提示：反向传播失败（{err}...）：sigmoid 的 backward 需要哪个张量？又是谁改动了它？",
    # lesson 06
    "assign choice (fp16_cl, bf16_cl or tie), ratio and spread (numbers)":
        "给 choice（fp16_cl、bf16_cl 或 tie）、ratio 和 spread（数）赋值",
    "like for like: that row also changes the optimizer, the layout, the loop or adds a compile; "
    "compare the two rows that differ in precision alone":
        "要同类相比：这一行还改变了优化器、布局、训练循环或加了编译；请比较只有精度不同的两行",
    "ratio: upside down: bf16_cl's images/s over fp16_cl's in each round":
        "ratio：比值颠倒了：应是每一轮中 bf16_cl 的 images/s 除以 fp16_cl 的",
    "ratio: the median of the per-round ratios bf16_cl / fp16_cl of the interleaved rounds "
    "(part 'repeat'), not one run's figures":
        "ratio：取交替轮次（part 为 'repeat'）中每轮比值 bf16_cl / fp16_cl 的中位数，而不是单次运行的数字",
    "spread: the largest |round ratio - median| of those ratios": "spread：这些比值中最大的 |每轮比值 - 中位数|",
    "the difference is inside the spread: call it a tie": "差异在波动幅度之内：应判为持平",
    "the difference is larger than the spread: that is not a tie": "差异大于波动幅度：不是持平",
    "measure, do not follow the guide: the faster of the two is the one whose images/s is higher in the rounds":
        "要靠测量，不要照搬指南：两者中更快的是在各轮中 images/s 更高的那个",
    "assign ratio_median and ratio_spread": "给 ratio_median 和 ratio_spread 赋值",
    "this run has no interleaved rounds of both {num} and {den}": "这次运行没有 {num} 和 {den} 交替进行的轮次",
    "ratio_spread: the largest |round ratio - median| (not the standard deviation, not max - min)":
        "ratio_spread：最大的 |每轮比值 - 中位数|（不是标准差，也不是 max - min）",
    "assign break_even_steps (a number), compile_short and compile_long (True or False)":
        "给 break_even_steps（一个数）、compile_short 和 compile_long（True 或 False）赋值",
    "compile_short and compile_long are decisions: True or False": "compile_short 和 compile_long 是判断结果（True 或 False）",
    "compile a job only when it runs more steps than the break-even": "只有当任务的步数超过盈亏平衡点时才编译",
    "ratio_median: that is the ratio of the two medians; take the median of the per-round ratios":
        "ratio_median：这是两个中位数之比；应取每轮比值的中位数",
    "ratio_median: divide num by den within each round, then take the median (not the mean) of those ratios":
        "ratio_median：在每一轮内用 num 除以 den，再取这些比值的中位数（不是平均值）",
    "this run has no {name} row: use the lesson's `evidence`": "这次运行没有 {name} 行：请用本课的 `evidence`",
    "the compiled recipe is not faster per step here: it never breaks even (break_even_steps = math.inf)":
        "在这里编译版方案每步并不更快：永远回不了本（break_even_steps = math.inf）",
    "break_even_steps: (compiled first step s - recipe first step s) / (seconds a step saves), with a step's seconds = batch / images per second; both first steps count":
        "break_even_steps：（编译版首步秒数 - 推荐方案首步秒数）/（每步节省的秒数），其中一步的秒数 = 批处理大小 / 每秒图像数；两个首步都要算",
    # lesson 07
    "return a tensor shaped like v: (tokens, d)": "返回与 v 形状相同的张量：(tokens, d)",
    "return the inputs' dtype ({want}), not {got}: cast back at the end": "返回输入的 dtype（{want}），而不是 {got}：最后再转换回来",
    "write a function (q, k, v, keep) -> tensor and assign it to fixed_attention":
        "写一个函数 (q, k, v, keep) -> 张量，赋给 fixed_attention",
    "inf/NaN on the last row, a query with no key to attend to: what does the softmax make of a row whose scores are all -inf?":
        "最后一行出现 inf/NaN，这个查询没有可关注的键：如果一行的分数全是 -inf，softmax 会得到什么？",
    "right for a causal mask, wrong for another one: the function adds a causal mask of its own to keep, or uses one instead of keep":
        "对因果掩码正确，换一个掩码就错了：函数在 keep 之外又加了自己构造的因果掩码，或者用它代替了 keep",
    "finite, but this is attention without the 1/sqrt(d) scale: is it there?": "结果有限，但这是没有 1/sqrt(d) 缩放的注意力：缩放加上了吗？",
    "finite, but the scores are scaled by {scale} instead of 1/sqrt(d) (d = {d} here): take d from q.shape[-1], and scale once (q or the scores, not both)":
        "结果有限，但分数的缩放是 {scale}，而不是 1/sqrt(d)（这里 d = {d}）：d 要取自 q.shape[-1]，并且只缩放一次（缩放 q 或分数，不要两个都缩放）",
    "finite, but {err:.3g} away from FP32 attention on the rows that have keys: is the mask the right way round (keep is True where a query may attend), and the softmax over the keys (dim=-1)?":
        "结果有限，但在有键的行上与 FP32 注意力相差 {err:.3g}：掩码方向对吗（查询可以关注的位置 keep 为 True）？softmax 是沿键的维度（dim=-1）做的吗？",
    "inf/NaN for inputs of magnitude 40: q @ k^T overflows FP16 (65 504) before a scale applied to the scores can act: where must the scale go?":
        "输入量级为 40 时出现 inf/NaN：作用在分数上的缩放还没起作用，q @ k^T 就已在 FP16 中上溢（65504）：缩放应该放在哪里？",
    "finite, but {err:.3g} away from FP32 attention for inputs of magnitude 40":
        "结果有限，但输入量级为 40 时与 FP32 注意力相差 {err:.3g}",
    "fixed_attention raised {error}: the mask value does not fit the scores' dtype (FP16's largest magnitude is 65 504)":
        "fixed_attention 抛出了 {error}：掩码值超出了分数的 dtype 能表示的范围（FP16 的最大绝对值是 65504）",
    "fixed_attention raised {error}": "fixed_attention 抛出了 {error}",
    "finite, but {err:.3g} away from FP32 attention: the mask is applied after the softmax, so the weights of each row's allowed keys no longer sum to 1":
        "结果有限，但与 FP32 注意力相差 {err:.3g}：掩码是在 softmax 之后施加的，所以每一行允许关注的键的权重之和不再是 1",
    "inf/NaN on a padded row (a query with no key) whose scores are all below -16: in FP16, score + finfo(float16).min rounds to -inf there (section 5b): what must the mask do to the masked scores, if not add to them?":
        "一个全部被屏蔽的行（没有任何键的查询）的分数全都低于 -16，结果出现 inf/NaN：在 FP16 中，score + finfo(float16).min 在这里会舍入为 -inf（第 5b 节）：如果不是把掩码加到分数上，它应该对被屏蔽的分数做什么？",
    "finite, but {err:.3g} away from FP32 attention on the rows that have keys":
        "结果有限，但在有键的行上与 FP32 注意力相差 {err:.3g}",
    "wrong on a row whose one allowed key scores about -12 800 (after the scale), far below the keys it may not see: its output must be that key's row of v. A mask applied after the softmax fails there (the allowed key's probability has already underflowed to 0), and so does a mask value such as -1e4 that is not below every score":
        "某一行的结果不对：这一行唯一允许关注的键的分数约为 -12800（缩放之后），远低于它不能关注的那些键；这一行的输出必须就是该键在 v 中对应的行。在 softmax 之后才施加掩码会在这里出错（允许关注的那个键的概率已经下溢为 0），像 -1e4 这样并不低于所有分数的掩码值也会出错",
    "assign both choice and state_gib": "请给 choice 和 state_gib 都赋值",
    "choice must be one of memory_table's row names: {rows}": "choice 必须是 memory_table 的行名之一：{rows}",
    "state_gib must be a number: GiB of weights, gradients and optimizer state of your choice":
        "state_gib 必须是一个数：你所选方案的权重、梯度和优化器状态占多少 GiB",
    "state_gib looks like GB: 1 GiB is 2**30 bytes, not 1e9": "state_gib 看起来是按 GB 算的：1 GiB 是 2**30 字节，不是 1e9",
    "state_gib: parameters times that setup's total bytes/param (memory_table), in GiB (2**30 bytes)":
        "state_gib：参数量乘以该方案的 total bytes/param（memory_table），以 GiB（2**30 字节）为单位",
    "{choice!r} does not fit: its state plus the {act:g} GiB of activations and the {res:g} GiB reserve (CUDA context, cuBLAS workspace, fragmentation) is more than the card's {card:.2f} GiB":
        "{choice!r} 放不下：它的状态加上 {act:g} GiB 激活值和 {res:g} GiB 预留（CUDA 上下文、cuBLAS 工作区、碎片），超过了显卡的 {card:.2f} GiB",
    "{choice!r} fits, but rounds each update to the nearest 16-bit weight: section 4 showed those updates lost. Pick a setup that keeps them":
        "{choice!r} 放得下，但每次更新都会舍入到最近的 16 位权重：第 4 节已经表明这些更新会丢失。请选一个能保住更新的方案",
    "assign both t4_choice and t4_logits": "请给 t4_choice 和 t4_logits 都赋值",
    "t4_choice must be one of {options}": "t4_choice 必须是 {options} 之一",
    "fp32 is finite, but runs no 16-bit matmul: the T4's Tensor Cores stay idle":
        "fp32 的结果有限，但没有 16 位矩阵乘法：T4 的 Tensor Core 闲着",
    "bf16 is finite, but a T4 (sm_75) has no native BF16: chip_features(t4.capability) says so":
        "bf16 的结果有限，但 T4（sm_75）不原生支持 BF16：chip_features(t4.capability) 会告诉你",
    "t4_logits must be the logits tensor of your choice, run on tokens":
        "t4_logits 必须是你所选方案在 tokens 上运行得到的 logits 张量",
    "t4_logits hold inf/NaN: run first_nonfinite on that option; a residual stream past 65 504 needs FP32":
        "t4_logits 含有 inf/NaN：对该选项运行 first_nonfinite；残差流超过 65504 就需要 FP32",
    "{choice!r} overflows on this model: first_nonfinite(copy.deepcopy(ex_deep).half(), tokens, 'fp32') names the block":
        "{choice!r} 在这个模型上会上溢：first_nonfinite(copy.deepcopy(ex_deep).half(), tokens, 'fp32') 会指出是哪个块",
    "t4_logits are {dtype}: compute them with your choice (under fp16 autocast the head returns FP16)":
        "t4_logits 是 {dtype}：请用你选的方案计算（在 fp16 autocast 下输出头返回 FP16）",
    "t4_logits are FP32 logits cast with .half() afterwards: no FP16 matmul ran; run the model under your choice instead":
        "t4_logits 是先用 FP32 算出、再用 .half() 转换的 logits：没有跑任何 FP16 矩阵乘法；请在你选的方案下运行模型",
    "t4_logits are {err:.3g} away from the FP32 model's": "t4_logits 与 FP32 模型的结果相差 {err:.3g}",
    # lesson 08
    "assign latency_sweep's table to ex_sweep": "把 latency_sweep 的表赋给 ex_sweep",
    "ex_sweep should be the table latency_sweep returns": "ex_sweep 应该是 latency_sweep 返回的表",
    "sweep one precision at four or more batch sizes (one row per batch)": "用一种精度扫描四个或更多批处理大小（每个批处理大小一行）",
    "include batch 1: the budget is a multiple of its latency": "要包含批处理大小 1：预算是它的延迟的倍数",
    "measure past the budget: include batch sizes whose latency exceeds it, to show where it binds":
        "测量范围要越过预算：包含延迟超出预算的批处理大小，才能看出预算从哪里开始起作用",
    "assign the batch size you choose (a number) to ex_batch": "把你选的批处理大小（一个数）赋给 ex_batch",
    "choose one of the batch sizes your table measured": "从你的表测过的批处理大小中选一个",
    "that batch takes longer than the budget: a request waits for its whole batch (ms_per_batch)":
        "这个批处理大小耗时超出预算：一个请求要等整批完成（ms_per_batch）",
    "within the budget a larger batch serves more items per second: take the most throughput that fits":
        "在预算之内，更大的批处理每秒处理的样本更多：选预算内吞吐量最高的",
    "pass the CUDA-graph table (graphs.frame)": "传入 CUDA Graphs 的表（graphs.frame）",
    "ex_plan must be a dict with one entry per card: {cards}": "ex_plan 必须是每张卡一项的字典：{cards}",
    "assign the model you would ship to the T4 to ex_t4_model": "把你要部署到 T4 上的模型赋给 ex_t4_model",
    "work on a copy (copy.deepcopy): ex_net must stay as it is": "在副本上操作（copy.deepcopy）：ex_net 必须保持原样",
    "cast the T4 model to FP16 (.half())": "把 T4 模型转换为 FP16（.half()）",
    "keep less in FP32: only the block that overflows": "少留一些在 FP32：只留会上溢的那个块",
    "the output still has inf/NaN: does the island reach from the layer that makes the large values to the one that shrinks them?":
        "输出仍有 inf/NaN：FP32 孤岛是否覆盖了从产生大数值的层到把它们缩小的层？",
    "the island's weights were rounded: make the island before casting": "孤岛里的权重被舍入了：先建孤岛，再做类型转换",
    "{name}: use one of the table's method names: {methods}": "{name}：请用表中的方法名之一：{methods}",
    "{name}: count the setup too: a process of {calls:,} calls takes setup_s + calls × ms / 1000 seconds":
        "{name}：准备开销也要算上：一个处理 {calls} 次调用的进程耗时 setup_s + 调用次数 × ms / 1000 秒",
    "{name}: eager is the baseline, not the default: total every method, the hand-captured graph too, not only torch.compile against eager (setup_s + calls × ms / 1000 seconds)":
        "{name}：eager 是基线，不是默认答案：把每种方法的总耗时都算出来，手动捕获的 CUDA Graph 也要算，而不只是拿 torch.compile 和 eager 比（setup_s + 调用次数 × ms / 1000 秒）",
    "{name}: a setup is paid once, the time per call {calls:,} times: total each method as setup_s + calls × ms / 1000 seconds and take the smallest":
        "{name}：准备开销只付一次，每次调用的耗时要付 {calls} 次：按 setup_s + 调用次数 × ms / 1000 秒算出每种方法的总耗时，取最小的",
    "ex_net was changed in place (cast or given an island): rebuild it by re-running its cell, and work on copies (copy.deepcopy(ex_net))":
        "ex_net 被原地修改了（被转换了类型或加了孤岛）：重新运行它所在的单元格重建它，并在副本上操作（copy.deepcopy(ex_net)）",
    "the FP32 island is in the wrong place: keep the block that overflows (first_nonfinite) in FP32, cast the rest to FP16":
        "FP32 孤岛放错了位置：把会上溢的那个块（first_nonfinite 会指出）留在 FP32，其余部分转换为 FP16",
    "ex_plan[{card!r}] must be one of {options}": "ex_plan[{card!r}] 必须是 {options} 之一",
    "ex_plan[{card!r}]: that card does not run {precision} natively (chip_features)":
        "ex_plan[{card!r}]：这张卡不原生支持 {precision}（见 chip_features）",
    "ex_plan[{card!r}]: among what the card runs natively and stays within 1 %, keep the fewest weights in FP32 (measure each option's error)":
        "ex_plan[{card!r}]：在这张卡原生支持且误差不超过 1% 的选项中，选 FP32 权重最少的（逐个测量各选项的误差）",
    "ex_t4_model(ex_x.half()) failed: {exc}": "ex_t4_model(ex_x.half()) 运行失败：{exc}",
    "the service runs in EX_PRECISION ({want}), your sweep in {got}: latency and throughput depend on the precision, so sweep precisions=[EX_PRECISION]":
        "服务以 EX_PRECISION（{want}）运行，你的扫描却用了 {got}：延迟和吞吐量都取决于精度，所以请用 precisions=[EX_PRECISION] 扫描",
    "ex_method_short and ex_method_long are swapped: the short process has fewer calls to pay back a setup":
        "ex_method_short 和 ex_method_long 填反了：短进程的调用次数更少，更难摊回准备开销",
    "{name}: units: ms is milliseconds per call, setup_s is seconds: convert (calls × ms / 1000) before adding them":
        "{name}：单位不一致：ms 是每次调用的毫秒数，setup_s 是秒：先换算（调用次数 × ms / 1000）再相加",
    "{name}: count the setup too, in the same unit: setup_s is seconds, ms is milliseconds per call, so a process of {calls:,} calls takes setup_s + calls × ms / 1000 seconds":
        "{name}：准备开销也要算上，而且单位要一致：setup_s 是秒，ms 是每次调用的毫秒数，所以一个处理 {calls} 次调用的进程耗时 setup_s + 调用次数 × ms / 1000 秒",
    "the service runs on this machine's device ({want}), your sweep ran on {got}: latency and throughput are a device's own, so sweep on device":
        "服务运行在这台机器的设备（{want}）上，你的扫描却在 {got} 上运行：延迟和吞吐量取决于设备本身，所以请在 device 上扫描",
    "the service gets images shaped like the training images ({want} per item), your sweep fed {got}: make_input sets the work per item, so shape it like the training images":
        "服务收到的图像形状与训练图像相同（每个样本 {want}），你的扫描输入的却是 {got}：make_input 决定了每个样本的计算量，所以要让它的形状与训练图像一致",
    # lesson 09
    "write a function x -> (data, scale) and assign it to my_rowwise": "写一个函数 x -> (data, scale)，赋给 my_rowwise",
    "return a tuple (data, scale)": "返回元组 (data, scale)",
    "one scale per row: shape (rows, 1) (amax over dim=1 with keepdim=True)":
        "每行一个缩放因子：形状为 (rows, 1)（在 dim=1 上取 amax，keepdim=True）",
    "scale = 448 / (the row's largest |value|), one per row": "scale = 448 /（该行最大的 |value|），每行一个",
    "the all-zero row gets scale inf (448 / 0): clamp amax below at 1e-12 before dividing":
        "全零的那一行得到的缩放因子是 inf（448 / 0）：做除法之前先把 amax 的下限钳位到 1e-12",
    "an all-zero row's scale is set by the clamp on amax: clamp below at 1e-12, as the exercise says":
        "全零行的缩放因子由 amax 的下限钳位决定：按题目要求把下限钳位到 1e-12",
    "that is the dequantisation factor amax / 448: the quantisation scale is 448 / amax":
        "这是反量化因子 amax / 448：量化缩放因子是 448 / amax",
    "448 is E4M3's max; 57344 is E5M2's": "448 是 E4M3 的最大值；57344 是 E5M2 的",
    "the scale was rounded to 16 bits on the way: compute amax and 448 / amax in float32":
        "缩放因子在计算途中被舍入成了 16 位：用 float32 计算 amax 和 448 / amax",
    "one scale for the whole tensor: rowwise means one amax per row": "整个张量只用了一个缩放因子：按行缩放意味着每行一个 amax",
    "amax is the largest magnitude: take x.abs() before the max (a row's largest value may be negative)":
        "amax 是最大的绝对值：取最大值之前先做 x.abs()（一行中绝对值最大的数可能是负数）",
    "amax is the row's largest |value|, not its mean: a mean-based scale overflows past 448":
        "amax 是该行最大的 |value|，不是平均值：按平均值算出的缩放因子会让数值超过 448",
    "cast the scaled values to torch.float8_e4m3fn": "把缩放后的值转换为 torch.float8_e4m3fn",
    "data = (x * scale) clamped to ±448, then cast": "data = (x * scale) 钳位到 ±448，再转换类型",
    "choice is the string 'fp8' or 'bf16'": "choice 是字符串 'fp8' 或 'bf16'",
    "no per-layer table here: run section 3a first": "这里没有逐层的表：先运行 3a 节",
    "the table has no row for width {width}: pick a width it measured": "表中没有宽度 {width} 的行：选一个测过的宽度",
    "evidence is a number: the speedup column of the row for your width": "evidence 是一个数：你所选宽度那一行的 speedup 列",
    "evidence: read the speedup of the row whose features equal the model's width, not another row":
        "evidence：读取 features 等于模型宽度的那一行的 speedup，不是别的行",
    "speedup below 1 means FP8 is slower at that width: keep those layers in BF16 (and the reverse)":
        "speedup 小于 1 表示 FP8 在该宽度下更慢：这些层保持 BF16（反之亦然）",
    "assign an int (not a float or a bool)": "赋一个 int（不是 float，也不是 bool）",
    "some step still saturates with this margin: count the saturating steps for each margin, as section 2c counts them":
        "用这个 margin 仍有某一步饱和：像 2c 节那样，对每个 margin 数一数饱和的步数",
    "no step saturates, but a smaller margin would do: find the smallest": "没有任何一步饱和，但更小的 margin 也够用：找出最小的那个",
    "write a function (a, b) -> tensor and assign it to fp8_mm": "写一个函数 (a, b) -> 张量，赋给 fp8_mm",
    "return the (M, N) product": "返回 (M, N) 的乘积",
    "ask torch._scaled_mm for out_dtype=torch.float32": "调用 torch._scaled_mm 时指定 out_dtype=torch.float32",
    "the product is far off: the scales torch._scaled_mm takes are the inverses 1/scale":
        "乘积相差很远：torch._scaled_mm 接收的缩放因子是倒数 1/scale",
    "quantise both operands tensorwise to E4M3 with scale 448/amax, clamped to ±448":
        "两个操作数都按整个张量量化为 E4M3，缩放因子为 448/amax，并钳位到 ±448",
    "my_rowwise raised {kind} ({err}): one scale per row must broadcast against x, so take amax over dim=1 with keepdim=True: shape (rows, 1)":
        "my_rowwise 抛出了 {kind}（{err}）：每行一个缩放因子，要能与 x 广播，所以在 dim=1 上取 amax 并设 keepdim=True：形状 (rows, 1)",
    "torch._scaled_mm refused it ({err}): b must be column-major (b.t().contiguous()...t()) and the scales float32 tensors":
        "torch._scaled_mm 拒绝了它（{err}）：b 必须是列主序（b.t().contiguous()...t()），缩放因子必须是 float32 张量",
    "scale must be float32, as torch._scaled_mm takes it (yours is {dtype})":
        "scale 必须是 float32，torch._scaled_mm 就按 float32 接收（你的是 {dtype}）",
    "the product was rounded to BF16 (out_dtype=torch.bfloat16, then .float()?): ask torch._scaled_mm for out_dtype=torch.float32 directly":
        "乘积被舍入成了 BF16（先用 out_dtype=torch.bfloat16 再 .float()？）：直接让 torch._scaled_mm 输出 out_dtype=torch.float32",
    "the operands were scaled in BF16 and rounded twice: multiply x * scale in float32, then clamp and cast to E4M3":
        "操作数是在 BF16 中缩放的，被舍入了两次：用 float32 计算 x * scale，再钳位并转换为 E4M3",
    "evidence is inverted: speedup = BF16 time / FP8 time (hp_ms / fp8_ms), above 1 when FP8 is faster":
        "evidence 取反了：speedup = BF16 时间 / FP8 时间（hp_ms / fp8_ms），FP8 更快时大于 1",
    "evidence is a time in ms: the speed-up is the ratio hp_ms / fp8_ms (the speedup column)":
        "evidence 是一个以 ms 计的时间：加速比是比值 hp_ms / fp8_ms（speedup 列）",
    "evidence is not in the table: use the measured speedup at the model's width, not a datasheet ratio or a typed-in number":
        "evidence 不在表中：用模型宽度处实测的 speedup，不要用规格书上的比值或手写的数",
    "correct reading of the table, and a tie: this speed-up is within {tie:.0%} of 1, closer than one timing per width can resolve, so either choice is defensible; section 3a says which measurement decides":
        "表读对了，但两者持平：这个加速比与 1 相差不到 {tie:.0%}，每个宽度只计时一次分辨不出这么小的差别，所以两种选择都说得通；3a 节说明由哪项测量来决定",
    "amax_log holds fewer than two steps: run section 2's probe training first":
        "amax_log 不足两步：先运行第 2 节的探测训练",
    "the second operand is row-major: CUDA's torch._scaled_mm wants it column-major (this CPU kernel accepts both); quantise b.t().contiguous() and pass its .t()":
        "第二个操作数是行主序：CUDA 上的 torch._scaled_mm 要求列主序（这里的 CPU 核函数两种都接受）；量化 b.t().contiguous()，再传入它的 .t()",
    "the first operand must stay row-major: the column-major layout belongs to the second, b":
        "第一个操作数必须保持行主序：列主序是对第二个操作数 b 的要求",
    "pass scale_a and scale_b as float32 tensors (0-d for tensorwise): torch._scaled_mm takes no Python floats and no 16-bit scales":
        "scale_a 和 scale_b 要传 float32 张量（按整个张量缩放时为 0 维）：torch._scaled_mm 不接受 Python float，也不接受 16 位的缩放因子",
    "call torch._scaled_mm (the exercise's operator) for the product":
        "用 torch._scaled_mm（本练习指定的算子）计算乘积",
    # lesson 10
    "half_grads: one gradient per half": "half_grads：每一半各一个梯度",
    "average the halves' gradients: DDP divides the sum by the number of ranks": "对两半的梯度取平均：DDP 把总和除以 rank 数",
    "choice is one of 'fp32', 'fp16', 'bf16'": "choice 取 'fp32'、'fp16'、'bf16' 之一",
    "FP32 gradients put twice the bytes on a link that is already the bottleneck": "FP32 梯度会让本来就是瓶颈的链路多传一倍的字节",
    "BF16 training has no loss scale: FP16 on the wire flushes small gradients to zero (exercise 3) and can overflow large ones; BF16 keeps FP32's range":
        "BF16 训练没有损失缩放：以 FP16 通信会让小梯度下溢为零（练习 3），大梯度还可能上溢；BF16 保留了 FP32 的动态范围",
    "grad_seconds is a number of seconds": "grad_seconds 是一个秒数",
    "10 GbE carries 10 Gbit/s: divide by its bytes per second, an eighth of that":
        "10 GbE 每秒传 10 Gbit：要除以它每秒的字节数，也就是它的八分之一",
    "a BF16 gradient is 2 bytes on the wire, not 4": "BF16 梯度在链路上占 2 个字节，不是 4 个",
    "multiply by the scale 2**16 before the cast": "转换之前先乘以缩放因子 2**16",
    "use_fsdp is True or False": "use_fsdp 是 True 或 False",
    "compare DDP's bytes per GPU with half the card: is the other half left for gradients and activations?":
        "把 DDP 每块 GPU 占用的字节数与显卡一半的显存比较：另一半是否还留给梯度和激活值？",
    "gib_per_gpu: section 7's measured held bytes per parameter (of the setup you chose) for 1.3 billion parameters, in GiB (2**30 bytes)":
        "gib_per_gpu：用第 7 节实测的每参数占用字节数（你所选方案的），按 13 亿参数计算，单位 GiB（2**30 字节）",
    "each entry of half_grads is the gradient of one half's mean loss": "half_grads 的每一项是其中一半数据平均损失的梯度",
    "(this torch build cannot run bf16_compress_hook; on a CUDA build it can)":
        "（这个 torch 不是 CUDA 版，不能运行 bf16_compress_hook；CUDA 版 torch 可以）",
    "{name} is a fraction between 0 and 1": "{name} 是 0 到 1 之间的比例",
    "traffic_ratio is a number: FSDP2's bytes per step divided by DDP's": "traffic_ratio 是一个数：FSDP2 每步发送的字节数除以 DDP 的",
    "each entry of half_grads is ex_model[0].weight.grad of one half: same shape and dtype (FP32) as that weight":
        "half_grads 的每一项是其中一半数据的 ex_model[0].weight.grad：形状和 dtype（FP32）都与该权重相同",
    "avg_grad is one tensor shaped like ex_model[0].weight, in FP32": "avg_grad 是一个与 ex_model[0].weight 形状相同的 FP32 张量",
    "avg_grad is the whole batch's gradient computed again, equal to the halves' mean only up to rounding: build it from the two entries of half_grads, as DDP's all-reduce does":
        "avg_grad 是重新计算的整批梯度，它与两半梯度的平均值只在舍入误差范围内相等：请用 half_grads 的两项来求它，就像 DDP 的 all-reduce 那样",
    "grad_seconds is in seconds: you gave milliseconds (section 8's table prints ms)":
        "grad_seconds 的单位是秒：你给的是毫秒（第 8 节的表格打印的是 ms）",
    "10 GbE's 1.25 GB/s is decimal, 1.25e9 bytes per second, not 1.25 GiB/s (2**30)":
        "10 GbE 的 1.25 GB/s 是十进制的，即每秒 1.25e9 字节，不是 1.25 GiB/s（2**30）",
    "no torch.autocast here: the 16-bit compute comes from MixedPrecisionPolicy(param_dtype=torch.float16), which also gathers the weights in FP16; autocast would gather FP32 and cast per op":
        "这里不要用 torch.autocast：16 位计算来自 MixedPrecisionPolicy(param_dtype=torch.float16)，它还以 FP16 all-gather 权重；autocast 会 all-gather FP32 权重，再逐个算子转换",
    "give MixedPrecisionPolicy reduce_dtype=torch.float32: left out, it falls back to param_dtype and the gradients are reduced in FP16":
        "给 MixedPrecisionPolicy 传 reduce_dtype=torch.float32：省略时它沿用 param_dtype，梯度就以 FP16 归约",
    "reduce_dtype=torch.{dtype} sums the ranks' gradients in 16 bits, which round away small contributions: give MixedPrecisionPolicy reduce_dtype=torch.float32":
        "reduce_dtype=torch.{dtype} 以 16 位对各 rank 的梯度求和，较小的贡献会在舍入中丢失：请给 MixedPrecisionPolicy 传 reduce_dtype=torch.float32",
    "call fully_shard on each Linear first (a loop), then on the whole model: one call on the model makes one all-gather of everything, no per-layer sharding units":
        "先对每个 Linear 调用 fully_shard（用循环），再对整个模型调用：只对模型调用一次，会一次 all-gather 全部权重，没有逐层的分片单元",
    "traffic_ratio: section 8's rule for each collective, with the bytes per parameter each one moves":
        "traffic_ratio：对每个集合通信用第 8 节的规则，并按它每个参数传输的字节数计算",
    "keep the FP32 weights: MixedPrecisionPolicy(param_dtype=torch.float16) casts for compute; model.half() makes the master weights and the gradients FP16, and GradScaler refuses those":
        "保留 FP32 权重：MixedPrecisionPolicy(param_dtype=torch.float16) 只在计算时转换；model.half() 会把主权重和梯度都变成 FP16，而 GradScaler 拒绝处理它们",
    "keep the FP32 weights: MixedPrecisionPolicy(param_dtype=torch.float16) casts for compute; model.half() makes the master weights FP16":
        "保留 FP32 权重：MixedPrecisionPolicy(param_dtype=torch.float16) 只在计算时转换；model.half() 会把主权重变成 FP16",
    "count the zeros on the wire, after the division: unscale_ divides by the scale later, on the gradients cast back to FP32":
        "数链路上（除法之后）的零：unscale_ 在之后才除以缩放因子，作用于转换回 FP32 的梯度",
    "an all-reduce sends the payload around the ring twice (a reduce-scatter, then an all-gather): 2(N-1)/N, not (N-1)/N":
        "all-reduce 要把载荷沿环发送两遍（先 reduce-scatter，再 all-gather）：是 2(N-1)/N，不是 (N-1)/N",
    "the hook casts first and divides after, in float16: two roundings; dividing first rounds once":
        "钩子先转换、后在 float16 中做除法：舍入两次；先做除法只舍入一次",
    "between steps means weights and Adam state (held_bytes_per_param): the gradients come on top and are not part of this number":
        "“两步之间”指权重和 Adam 状态（held_bytes_per_param）：梯度另算，不包含在这个数里",
    "gib_per_gpu is a number of GiB":
        "gib_per_gpu 是一个以 GiB 为单位的数",
    "1.5 counts one all-gather, or every collective in one dtype (ZeRO's 1.5x): fsdp_bf16_fp32 all-gathers the 2-byte BF16 weights twice per step (for forward, and again for backward: reshard_after_forward frees them in between) and reduce-scatters 4-byte FP32 gradients":
        "1.5 只算了一次 all-gather，或者把所有集合通信都按同一种 dtype 算了（ZeRO 的 1.5 倍）：fsdp_bf16_fp32 每步对 2 字节的 BF16 权重 all-gather 两次（前向一次，反向再一次：reshard_after_forward 在两次之间释放它们），reduce-scatter 的是 4 字节的 FP32 梯度",
    "a ring all-reduce sends its payload twice, 2(N-1)/N; an all-gather or a reduce-scatter sends it once, (N-1)/N":
        "环形 all-reduce 把载荷发送两遍，即 2(N-1)/N；all-gather 或 reduce-scatter 只发送一遍，即 (N-1)/N",
    "that is the other setup's held bytes: use the row of the setup you chose":
        "这是另一种方案的占用字节数：请用你所选方案的那一行",
    "the gradients reach the bucket already scaled (GradScaler scaled the loss): multiply by 2**16 before the cast, not after":
        "梯度进入桶时已经缩放过（GradScaler 缩放的是损失）：要在转换之前乘以 2**16，而不是之后",
    "the DDP to compare trains in BF16 with --grad-dtype bf16: its hook all-reduces 2-byte BF16 gradients, not ddp_fp32's 4":
        "要比较的 DDP 以 BF16 训练并设 --grad-dtype bf16：它的钩子 all-reduce 的是 2 字节的 BF16 梯度，不是 ddp_fp32 的 4 字节",
    "gib_per_gpu is in GiB: divide the bytes by 2**30, not 1e9":
        "gib_per_gpu 的单位是 GiB：字节数要除以 2**30，而不是 1e9",
    "cast g_ex to float16, then divide by 8 in float16, and count the values that became 0 (for flushed_scaled, multiply g_ex by 2**16 first)":
        "先把 g_ex 转换为 float16，再在 float16 中除以 8，然后数变成 0 的值（对 flushed_scaled，先把 g_ex 乘以 2**16）",
    "0 is what a bfloat16 cast gives (FP32's range), or a guess: fp16_compress_hook casts to float16, whose window, scaled or not, still has a lower end; compute the fraction":
        "0 是转换为 bfloat16（动态范围与 FP32 相同）得到的结果，或者是猜的：fp16_compress_hook 转换为 float16，无论是否缩放，它的表示范围都有下限；请把比例算出来",
    "grad_seconds: section 8's ring all-reduce time for every rank in the ring, with your dtype's bytes per parameter":
        "grad_seconds：用第 8 节的环形 all-reduce 时间，环里的全部 rank 都要算上，按你所选 dtype 每个参数的字节数计算",
    "div_(world_size) runs on the FP16 bucket: divide by 8 in float16, after the cast (dividing in FP32, or not at all, counts only what the cast itself flushed)":
        "div_(world_size) 作用于 FP16 的桶：要在转换之后、在 float16 中除以 8（用 FP32 做除法或者不做除法，数到的只是转换本身下溢为零的值）",
    "held_bytes_per_param is already per rank (FSDP2's 1/N is in it): do not divide by the number of GPUs again":
        "held_bytes_per_param 已经是每个 rank 的数（其中已含 FSDP2 的 1/N）：不要再除以 GPU 数",
    "count the GPUs, not the boxes: the ring joins all {ranks} ranks, and each sends 2(N-1)/N times the payload (for two ranks that factor is 1, so it looks as if it could be left out)":
        "数 GPU，不是数机器：环把全部 {ranks} 个 rank 连在一起，每个发送载荷的 2(N-1)/N 倍（两个 rank 时这个系数是 1，所以看起来好像可以省掉）",
    "traffic_ratio is FSDP2's bytes divided by DDP's, not the reverse":
        "traffic_ratio 是 FSDP2 的字节数除以 DDP 的，不是反过来",
    "the script failed under torchrun: {line}": "脚本在 torchrun 下运行失败：{line}",
    "start the script with torchrun (python -m torch.distributed.run --standalone --nproc_per_node=2 ...): it sets RANK, WORLD_SIZE and the rendezvous":
        "用 torchrun 启动脚本（python -m torch.distributed.run --standalone --nproc_per_node=2 ...）：它会设置 RANK、WORLD_SIZE 和 rendezvous",
    "save with torch.distributed.checkpoint (dcp.save) into job_dir / \"ckpt\" on every rank: torch.save on rank 0 writes no sharded checkpoint":
        "在每个 rank 上用 torch.distributed.checkpoint（dcp.save）保存到 job_dir / \"ckpt\"：只在 rank 0 上 torch.save 写不出分片检查点",
    "job_run is what subprocess.run returned when it launched your script with torchrun":
        "job_run 是 subprocess.run 用 torchrun 启动你的脚本时返回的结果",
    "no result.json in job_dir: rank 0 writes it at the end of the script": "job_dir 里没有 result.json：由 rank 0 在脚本末尾写入",
    "two ranks on gloo: --nproc_per_node=2, and init_process_group(\"gloo\") (the CPU backend)":
        "两个 rank、使用 gloo：--nproc_per_node=2，并且 init_process_group(\"gloo\")（CPU 后端）",
    "pass mp_policy=MixedPrecisionPolicy(param_dtype=torch.float16) to every fully_shard call: without it FSDP2 computes in the weights' own FP32":
        "在每次调用 fully_shard 时传入 mp_policy=MixedPrecisionPolicy(param_dtype=torch.float16)：没有它，FSDP2 就按权重本身的 FP32 计算",
    "the checkpoint holds no model weights: save get_state_dict(model, opt)'s model part under \"model\"":
        "检查点里没有模型权重：把 get_state_dict(model, opt) 的模型部分保存在 \"model\" 下",
    "shard every Linear and then the whole model with fully_shard: each rank should save its half of every weight, not a full copy":
        "用 fully_shard 先分片每个 Linear，再分片整个模型：每个 rank 应保存每个权重的一半，而不是完整副本",
    "put scaler.state_dict() into what dcp.save writes (under \"scaler\"): a resumed FP16 run must continue at the saved loss scale":
        "把 scaler.state_dict() 放进 dcp.save 写入的内容（在 \"scaler\" 下）：恢复的 FP16 训练必须从保存的损失缩放因子继续",
    "load the checkpoint back with dcp.load, then set_state_dict and scaler.load_state_dict: the weights and the scale afterwards must equal those saved":
        "用 dcp.load 把检查点读回来，再调用 set_state_dict 和 scaler.load_state_dict：之后的权重和缩放因子必须与保存时相同",
}
