import ichor


def test_package_documents_its_layers() -> None:
    assert ichor.__doc__ is not None
    assert "release" in ichor.__doc__
