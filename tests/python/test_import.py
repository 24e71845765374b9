import rpa


def test_package_imports_the_extension():
    assert rpa._rpa.__doc__.startswith("rpa:")
