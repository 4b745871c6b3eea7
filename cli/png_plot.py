"""Line charts as PNG files without a plotting library: an RGB pixel buffer, straight lines,
a 3x5 pixel font drawn at twice its size, and the PNG format (signature, IHDR, one zlib-compressed
IDAT of filter-0 scanlines, IEND; each chunk with its CRC-32)."""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence
from typing import NamedTuple

Color = tuple[int, int, int]
WHITE: Color = (255, 255, 255)
BLACK: Color = (0, 0, 0)
GRID: Color = (225, 225, 225)
BLUE: Color = (31, 119, 180)
ORANGE: Color = (255, 127, 14)
RED: Color = (214, 39, 40)

# Each glyph: five rows of three pixels, '#' set. Lower case letters are drawn as upper case.
_FONT = {
    "0": ["###", "# #", "# #", "# #", "###"], "1": [" # ", "## ", " # ", " # ", "###"],
    "2": ["###", "  #", "###", "#  ", "###"], "3": ["###", "  #", "###", "  #", "###"],
    "4": ["# #", "# #", "###", "  #", "  #"], "5": ["###", "#  ", "###", "  #", "###"],
    "6": ["###", "#  ", "###", "# #", "###"], "7": ["###", "  #", "  #", "  #", "  #"],
    "8": ["###", "# #", "###", "# #", "###"], "9": ["###", "# #", "###", "  #", "###"],
    "A": [" # ", "# #", "###", "# #", "# #"], "B": ["## ", "# #", "## ", "# #", "## "],
    "C": [" ##", "#  ", "#  ", "#  ", " ##"], "D": ["## ", "# #", "# #", "# #", "## "],
    "E": ["###", "#  ", "## ", "#  ", "###"], "F": ["###", "#  ", "## ", "#  ", "#  "],
    "G": [" ##", "#  ", "# #", "# #", " ##"], "H": ["# #", "# #", "###", "# #", "# #"],
    "I": ["###", " # ", " # ", " # ", "###"], "J": ["  #", "  #", "  #", "# #", " # "],
    "K": ["# #", "## ", "#  ", "## ", "# #"], "L": ["#  ", "#  ", "#  ", "#  ", "###"],
    "M": ["# #", "###", "###", "# #", "# #"], "N": ["## ", "# #", "# #", "# #", "# #"],
    "O": [" # ", "# #", "# #", "# #", " # "], "P": ["## ", "# #", "## ", "#  ", "#  "],
    "Q": [" # ", "# #", "# #", "## ", " ##"], "R": ["## ", "# #", "## ", "# #", "# #"],
    "S": [" ##", "#  ", " # ", "  #", "## "], "T": ["###", " # ", " # ", " # ", " # "],
    "U": ["# #", "# #", "# #", "# #", "###"], "V": ["# #", "# #", "# #", "# #", " # "],
    "W": ["# #", "# #", "###", "###", "# #"], "X": ["# #", "# #", " # ", "# #", "# #"],
    "Y": ["# #", "# #", " # ", " # ", " # "], "Z": ["###", "  #", " # ", "#  ", "###"],
    ".": ["   ", "   ", "   ", "   ", " # "], "/": ["  #", "  #", " # ", "#  ", "#  "],
    "-": ["   ", "   ", "###", "   ", "   "], ":": ["   ", " # ", "   ", " # ", "   "],
    "(": [" # ", "#  ", "#  ", "#  ", " # "], ")": [" # ", "  #", "  #", "  #", " # "],
    "%": ["# #", "  #", " # ", "#  ", "# #"], " ": ["   ", "   ", "   ", "   ", "   "],
}
SCALE = 2
CHAR_WIDTH = 4 * SCALE  # three pixels and a space
CHAR_HEIGHT = 5 * SCALE


class Canvas:
    def __init__(self, width: int, height: int, background: Color = WHITE) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(background) * (width * height))

    def set(self, x: int, y: int, color: Color) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = 3 * (y * self.width + x)
            self.pixels[i:i + 3] = bytes(color)

    def line(self, x0: int, y0: int, x1: int, y1: int, color: Color, thickness: int = 1) -> None:
        """Bresenham's line, `thickness` pixels square."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        error = dx + dy
        while True:
            for ox in range(thickness):
                for oy in range(thickness):
                    self.set(x0 + ox, y0 + oy, color)
            if x0 == x1 and y0 == y1:
                return
            doubled = 2 * error
            if doubled >= dy:
                error += dy
                x0 += sx
            if doubled <= dx:
                error += dx
                y0 += sy

    def text(self, x: int, y: int, text: str, color: Color = BLACK) -> None:
        """`text` with its top left corner at (x, y); characters outside the font as blanks."""
        for n, char in enumerate(text.upper()):
            for row, bits in enumerate(_FONT.get(char, _FONT[" "])):
                for col, bit in enumerate(bits):
                    if bit == "#":
                        for ox in range(SCALE):
                            for oy in range(SCALE):
                                self.set(x + n * CHAR_WIDTH + col * SCALE + ox, y + row * SCALE + oy, color)

    def png(self) -> bytes:
        rows = b"".join(b"\0" + bytes(self.pixels[3 * self.width * y:3 * self.width * (y + 1)])
                        for y in range(self.height))
        return (b"\x89PNG\r\n\x1a\n"
                + _chunk(b"IHDR", struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0))
                + _chunk(b"IDAT", zlib.compress(rows, 9)) + _chunk(b"IEND", b""))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


class Series(NamedTuple):
    name: str
    color: Color
    points: Sequence[tuple[float, float]]


class Panel(NamedTuple):
    title: str
    series: Sequence[Series]


def _nice_max(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at or above `value` (1 for nothing)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 2.5, 5, 10) if step * power >= value * (1 - 1e-9))


def _label(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.2g}"


def plot(panels: Sequence[Panel], x_label: str, width: int = 800, panel_height: int = 260) -> bytes:
    """The panels stacked, sharing the x axis (0 to the largest x): each with its title, its
    series' legend, a y axis from 0 and five grid lines. A PNG file's bytes."""
    left, right, top, bottom = 70, 20, 30, 30
    canvas = Canvas(width, panel_height * len(panels) + bottom)
    x_max = max((x for panel in panels for series in panel.series for x, _ in series.points), default=1.0) or 1.0
    plot_width = width - left - right
    for index, panel in enumerate(panels):
        y0 = index * panel_height + top
        plot_height = panel_height - top - 20
        y_max = _nice_max(max((y for series in panel.series for _, y in series.points), default=0.0))
        canvas.text(left, y0 - 22, panel.title)
        legend_x = width - right
        for series in reversed(panel.series):
            legend_x -= (len(series.name) + 3) * CHAR_WIDTH
            canvas.line(legend_x, y0 - 17, legend_x + 14, y0 - 17, series.color, 2)
            canvas.text(legend_x + 20, y0 - 22, series.name)
        for tick in range(6):
            y = y0 + plot_height - round(tick / 5 * plot_height)
            canvas.line(left, y, left + plot_width, y, GRID if tick else BLACK)
            label = _label(y_max * tick / 5)
            canvas.text(left - 6 - len(label) * CHAR_WIDTH, y - CHAR_HEIGHT // 2, label)
        canvas.line(left, y0, left, y0 + plot_height, BLACK)
        for series in panel.series:
            pixels = [(left + round(x / x_max * plot_width), y0 + plot_height - round(min(y, y_max) / y_max * plot_height))
                      for x, y in series.points]
            for (xa, ya), (xb, yb) in zip(pixels, pixels[1:]):
                canvas.line(xa, ya, xb, yb, series.color, 2)
            if len(pixels) == 1:
                canvas.line(*pixels[0], *pixels[0], series.color, 3)
    axis_y = panel_height * len(panels) - 20 + 6
    for tick in range(6):
        label = f"{x_max * tick / 5:.1f}".removesuffix(".0")
        x = left + round(tick / 5 * plot_width)
        canvas.text(x - len(label) * CHAR_WIDTH // 2, axis_y, label)
    canvas.text(left + plot_width // 2 - len(x_label) * CHAR_WIDTH // 2, axis_y + CHAR_HEIGHT + 6, x_label)
    return canvas.png()
