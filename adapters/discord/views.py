"""The interactive pieces: a GPU menu, a confirmation, page buttons and a modal for text fields.

Each only gathers an answer and hands it back through a callback; what the answer means stays
in the conversation, so these know nothing about the core.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import discord
import structlog

from kernelcup.adapters.discord.render import Page
from kernelcup.core.commands.registry import Param

log = structlog.get_logger("kernelcup.discord")

MENU_TIMEOUT_S = 600.0  # a menu left open is dropped from memory after this
PAGER_TIMEOUT_S = 900.0
MAX_OPTIONS = 25  # Discord's limit for a select menu

OnPick = Callable[[discord.Interaction, list[str]], Awaitable[None]]
OnPress = Callable[[discord.Interaction], Awaitable[None]]
OnFields = Callable[[discord.Interaction, dict[str, str]], Awaitable[None]]


class OwnerOnly(discord.ui.View):
    """A view only the person who asked may use (others get a short private note)."""

    def __init__(self, owner_id: int, timeout: float) -> None:
        super().__init__(timeout=timeout)
        self.owner_id = owner_id

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        if interaction.user.id == self.owner_id:
            return True
        await interaction.response.send_message("This menu belongs to someone else's request.", ephemeral=True)
        return False


class GpuMenu(OwnerOnly):
    def __init__(self, owner_id: int, gpus: Sequence[str], on_pick: OnPick) -> None:
        super().__init__(owner_id, MENU_TIMEOUT_S)
        self._on_pick = on_pick
        options = list(gpus)[:MAX_OPTIONS]
        self.select: discord.ui.Select[GpuMenu] = discord.ui.Select(
            placeholder="Choose one or more GPUs",
            min_values=1,
            max_values=len(options),
            options=[discord.SelectOption(label=gpu, value=gpu) for gpu in options],
        )
        self.select.callback = self._picked  # type: ignore[method-assign]
        self.add_item(self.select)

    async def _picked(self, interaction: discord.Interaction) -> None:
        self.stop()
        await self._on_pick(interaction, list(self.select.values))


class Confirm(OwnerOnly):
    def __init__(self, owner_id: int, label: str, on_confirm: OnPress) -> None:
        super().__init__(owner_id, MENU_TIMEOUT_S)
        self._on_confirm = on_confirm
        confirm: discord.ui.Button[Confirm] = discord.ui.Button(label=label[:80], style=discord.ButtonStyle.danger)
        cancel: discord.ui.Button[Confirm] = discord.ui.Button(label="Cancel", style=discord.ButtonStyle.secondary)
        confirm.callback = self._confirmed  # type: ignore[method-assign]
        cancel.callback = self._cancelled  # type: ignore[method-assign]
        self.add_item(confirm)
        self.add_item(cancel)

    async def _confirmed(self, interaction: discord.Interaction) -> None:
        self.stop()
        await self._on_confirm(interaction)

    async def _cancelled(self, interaction: discord.Interaction) -> None:
        self.stop()
        await interaction.response.edit_message(content="Cancelled; nothing was changed.", embed=None, view=None)


class Pager(discord.ui.View):
    """Previous/next buttons over pages of one reply; anyone who sees the reply may turn them."""

    def __init__(self, pages: Sequence[Page]) -> None:
        super().__init__(timeout=PAGER_TIMEOUT_S)
        self.pages = list(pages)
        self.index = 0
        self.previous: discord.ui.Button[Pager] = discord.ui.Button(label="◀", style=discord.ButtonStyle.secondary)
        self.counter: discord.ui.Button[Pager] = discord.ui.Button(label="", disabled=True)
        self.next: discord.ui.Button[Pager] = discord.ui.Button(label="▶", style=discord.ButtonStyle.secondary)
        self.previous.callback = self._back  # type: ignore[method-assign]
        self.next.callback = self._forward  # type: ignore[method-assign]
        for item in (self.previous, self.counter, self.next):
            self.add_item(item)
        self._label()

    def page(self) -> discord.Embed:
        return self.pages[self.index].embed()

    def _label(self) -> None:
        self.counter.label = f"{self.index + 1}/{len(self.pages)}"
        self.previous.disabled = self.index == 0
        self.next.disabled = self.index == len(self.pages) - 1

    async def _back(self, interaction: discord.Interaction) -> None:
        await self._turn(interaction, -1)

    async def _forward(self, interaction: discord.Interaction) -> None:
        await self._turn(interaction, 1)

    async def _turn(self, interaction: discord.Interaction, step: int) -> None:
        self.index = max(0, min(len(self.pages) - 1, self.index + step))
        self._label()
        await interaction.response.edit_message(embed=self.page(), view=self)


class FieldsModal(discord.ui.Modal):
    """The text fields of a command (name, deadline, GPUs, ...) in one form."""

    def __init__(self, title: str, params: Sequence[Param], on_fields: OnFields) -> None:
        super().__init__(title=title[:45], timeout=MENU_TIMEOUT_S)
        self._on_fields = on_fields
        self.inputs: dict[str, discord.ui.TextInput[FieldsModal]] = {}
        for param in params[:5]:  # Discord's limit per modal
            default = "" if param.default is None else str(param.default)
            text_input: discord.ui.TextInput[FieldsModal] = discord.ui.TextInput(
                custom_id=param.name,
                required=param.required and not default,
                default=default or None,
                placeholder=("several, separated by spaces" if param.many else param.help)[:100],
                max_length=200,
            )
            self.inputs[param.name] = text_input
            self.add_item(discord.ui.Label(text=param.name.replace("_", " ").capitalize()[:45],
                                           description=param.help[:100], component=text_input))

    async def on_submit(self, interaction: discord.Interaction) -> None:
        await self._on_fields(interaction, {name: item.value for name, item in self.inputs.items()})

    async def on_error(self, interaction: discord.Interaction, error: Exception, /) -> None:  # type: ignore[override]
        log.error("modal failed", exc_info=error)
