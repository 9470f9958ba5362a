"""Operations: proposals the application prepares, their exactly-once execution, and the signed
application protocol client.
"""

from typing import TYPE_CHECKING

from bot import lazy_exports

if TYPE_CHECKING:
    from bot.operations.contract_client import ContractClient
    from bot.operations.execution import Execution, Finish, Retry
    from bot.operations.proposals import Proposals

__all__ = ["ContractClient", "Execution", "Finish", "Proposals", "Retry"]
__getattr__ = lazy_exports(
    __name__,
    __all__,
    {
        "bot.operations.contract_client": ["ContractClient"],
        "bot.operations.execution": ["Execution", "Finish", "Retry"],
        "bot.operations.proposals": ["Proposals"],
    },
)
