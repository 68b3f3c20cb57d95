"""wave_quantization's tile arithmetic on both axes, with efficiencies worked out by hand.

A tile is ``tile[0]`` rows by ``tile[1]`` columns of the m×n output. Ragged columns, ragged rows
and both, under square and non-square tiles, so a count that forgets the column tiles or pairs
m with the column size gives a wrong number.
"""

from __future__ import annotations

import pytest

from fp16lab.align import wave_quantization


def test_ragged_columns_need_a_second_column_of_tiles():
    w = wave_quantization(128, 129, sm_count=4)  # 1 row of tiles x 2 columns: the second holds one column
    assert w["tiles"] == 2
    assert w["tile_efficiency"] == pytest.approx(16512 / 32768)  # 128*129 useful of 2*128*128 = 0.50390625
    assert w["waves"] == pytest.approx(0.5) and w["full_waves"] == 1 and w["wave_efficiency"] == pytest.approx(0.5)
    assert w["efficiency"] == pytest.approx(0.251953125)  # 0.5 * 0.50390625


def test_ragged_rows_and_columns_under_a_non_square_tile():
    w = wave_quantization(200, 300, sm_count=8, tile=(128, 64))
    # rows: ceil(200/128) = 2 tiles; columns: ceil(300/64) = 5 tiles; 10 tiles of 8192 cells
    assert w["tiles"] == 10
    assert w["tile_efficiency"] == pytest.approx(60000 / 81920)  # 0.732421875
    assert w["waves"] == pytest.approx(1.25) and w["full_waves"] == 2 and w["wave_efficiency"] == pytest.approx(0.625)
    assert w["efficiency"] == pytest.approx(0.457763671875)  # 0.625 * 0.732421875


def test_a_non_square_tile_is_rows_by_columns():
    tall = wave_quantization(256, 100, sm_count=1, tile=(256, 128))  # one tile, 100 of its 128 columns used
    assert tall["tiles"] == 1 and tall["tile_efficiency"] == pytest.approx(0.78125)  # 25600 / 32768
    wide = wave_quantization(256, 100, sm_count=1, tile=(128, 256))  # 2 row tiles, 100 of 256 columns used
    assert wide["tiles"] == 2 and wide["tile_efficiency"] == pytest.approx(0.390625)  # 25600 / 65536
    assert wide["full_waves"] == 2 and wide["efficiency"] == pytest.approx(0.390625)


def test_ragged_columns_alone_cost_the_same_as_ragged_rows_alone():
    rows = wave_quantization(129, 128, sm_count=4, tile=(128, 64))  # 2 x 2 tiles
    cols = wave_quantization(128, 129, sm_count=4, tile=(64, 128))  # the same problem, transposed: 2 x 2
    for w in (rows, cols):
        assert w["tiles"] == 4
        assert w["tile_efficiency"] == pytest.approx(16512 / 32768)
        assert w["efficiency"] == pytest.approx(16512 / 32768)  # 4 tiles on 4 SMs: one full wave


def test_the_lessons_case_on_132_sms():
    w = wave_quantization(1000, 4096, sm_count=132, tile=(128, 256))
    # 8 row tiles (1024 rows) x 16 column tiles: 128 tiles, one wave with 4 SMs idle
    assert w["tiles"] == 128 and w["full_waves"] == 1
    assert w["wave_efficiency"] == pytest.approx(128 / 132)
    assert w["tile_efficiency"] == pytest.approx(1000 / 1024)
    assert w["efficiency"] == pytest.approx(128 / 132 * 1000 / 1024)
