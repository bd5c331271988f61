"""reference.sizing: the worker's own size arithmetic, against values worked out by hand."""
import pytest

from reference.shapes import ModelSpec, WorkerSpec
from reference.sizing import Geometry, pages_for

GiB, MiB = 1 << 30, 1 << 20
# 32 layers, 8 KV heads of 128, bf16: 2 (K and V) * 32 * 8 * 128 * 2 B = 131072 B = 128 KiB a token.
GQA = ModelSpec("gqa-8b-bf16", layers=32, kv_heads=8, head_dim=128, dtype_bytes=2,
                max_context=32768, weight_bytes=16 * GiB)


@pytest.mark.parametrize("tokens,page_tokens,pages", [
    (0, 16, 0), (1, 16, 1), (15, 16, 1), (16, 16, 1), (17, 16, 2), (32, 16, 2), (33, 16, 3),
    (5, 1, 5), (2 ** 53 + 1, 1, 2 ** 53 + 1), (2 ** 53 + 1, 2, 2 ** 52 + 1),
])
def test_pages_for_is_the_exact_ceiling(tokens, page_tokens, pages):
    assert pages_for(tokens, page_tokens) == pages


def test_geometry_of_a_gqa_model_on_an_80_gib_worker():
    worker = WorkerSpec(device_bytes=80 * GiB, reserved_bytes=4 * GiB, page_tokens=16, max_running=128)
    g = Geometry.of(GQA, worker)
    # A 16-token page: 2 MiB. Free: 80 - 16 - 4 = 60 GiB = 30720 pages.
    assert g == Geometry(kv_bytes_per_token=131072, page_tokens=16, page_bytes=2 * MiB,
                         pool_pages=30720)
    assert g.pages(0) == 0 and g.pages(16) == 1 and g.pages(17) == 2


def test_geometry_rounds_a_partial_page_down_and_an_overfull_device_to_zero():
    odd = WorkerSpec(device_bytes=80 * GiB + 2 * MiB - 1, reserved_bytes=4 * GiB, page_tokens=16,
                     max_running=1)
    assert Geometry.of(GQA, odd).pool_pages == 30720            # one byte short of 30721
    exact = WorkerSpec(device_bytes=80 * GiB + 2 * MiB, reserved_bytes=4 * GiB, page_tokens=16,
                       max_running=1)
    assert Geometry.of(GQA, exact).pool_pages == 30721
    full = WorkerSpec(device_bytes=16 * GiB, reserved_bytes=1, page_tokens=16, max_running=1)
    assert Geometry.of(GQA, full).pool_pages == 0               # weights + reserve > device


def test_geometry_of_an_fp32_mha_model_with_one_token_pages():
    mha = ModelSpec("mha", layers=2, kv_heads=4, head_dim=16, dtype_bytes=4, max_context=64,
                    weight_bytes=1000)
    worker = WorkerSpec(device_bytes=1000 + 512 + 10 * 1024 + 1023, reserved_bytes=512,
                        page_tokens=1, max_running=1)
    # 2 * 2 * 4 * 16 * 4 B = 1024 B a token and a page; 11263 free bytes hold 10 pages.
    assert Geometry.of(mha, worker) == Geometry(1024, 1, 1024, 10)


def test_geometry_is_frozen():
    import dataclasses
    g = Geometry.of(GQA, WorkerSpec(device_bytes=80 * GiB, reserved_bytes=0, page_tokens=16,
                                    max_running=1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.pool_pages = 1


@pytest.mark.parametrize("pages, refused", [(1, False), (1_048_576, False), (1_048_577, True), (2**40, True)])
def test_a_pool_of_more_than_a_mebipage_is_too_large_to_simulate(pages, refused):
    """The worker keeps an entry per page: 2**20 pages (34 times the course's largest pool)
    is the most it simulates, and the message says what to shrink."""
    from reference.sizing import pool_too_large
    said = pool_too_large(Geometry(kv_bytes_per_token=1, page_tokens=1, page_bytes=1, pool_pages=pages))
    if not refused:
        assert said is None
    else:
        assert said == (f"the pool would hold {pages:,} pages, more than the worker simulates (1,048,576): a "
                        f"smaller device_bytes, or larger pages (page_tokens, or the model's KV per token)")
