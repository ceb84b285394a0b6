"""The API's models (pydantic v2), generated from the OpenAPI document: ``Update``, ``Message``, ``Bot``...

Field names are Python's (``file_name``); the wire names (``fileName``) are their aliases, so
``model.model_dump(by_alias=True)`` is what the service sends and accepts.
"""

from ._generated.models import *  # noqa: F403
