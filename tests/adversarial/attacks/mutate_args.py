"""Attack: mutate the arguments (frozen or not), their classes and the shapes module,
hoping the grader's own copies, and the next submission's cases, change too."""
import reference.shapes as shapes


def vandalise(*args):
    for arg in args:
        for name in getattr(type(arg), "__dataclass_fields__", {}):
            try:
                object.__setattr__(arg, name, 0)
            except Exception:
                pass
        type(arg).__eq__ = lambda self, other: True
    shapes.CONTRACT_REASONS = ("mutated",)
    return "mutated"


kv_bytes_per_token = pages_for = pool_pages = worst_case_pages = check_contract = vandalise
