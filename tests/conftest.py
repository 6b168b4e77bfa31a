import pytest

from tests.server import Site


@pytest.fixture
def site():
    site = Site()
    yield site
    site.close()


@pytest.fixture
def other_site():
    site = Site()
    yield site
    site.close()
