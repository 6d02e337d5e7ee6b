"""Charts that stay small in the repository: every chart a report of the package draws is written
by :func:`save_chart`, a PNG with a palette of at most 256 colours.

A matplotlib chart of lines, markers and text holds a few dozen colours and their anti-aliased
blends, so a palette keeps it to the eye (the mean change of a channel is under half a level of
255 on the charts of ``docs/results/``) at about a third of matplotlib's own truecolour PNG: 3.4
MB became 1.2 MB over the charts of ``docs/results/``. The palette is chosen by
Pillow's median cut without dithering (dithering would add noise to flat areas and bytes to the
file); a picture that is smaller as it was (a photograph-like one), or that has transparent
pixels, is written as matplotlib drew it. Pillow is matplotlib's own dependency, so nothing is added to the ``eval`` extra.
"""
import io


def shrink_png(data: bytes) -> bytes:
    """The PNG ``data`` with a palette of at most 256 colours, optimised; ``data`` itself when
    that is not smaller, or when the picture has transparent pixels (a palette of opaque colours
    would lose them; matplotlib draws its charts opaque)."""
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    if "transparency" in image.info or (
            image.mode in ("RGBA", "LA") and image.getchannel("A").getextrema()[0] < 255):
        return data
    paletted = image.convert("RGB").quantize(256, dither=Image.Dither.NONE)
    out = io.BytesIO()
    paletted.save(out, format="PNG", optimize=True)
    return out.getvalue() if out.tell() < len(data) else data


def save_chart(fig, path: str, dpi: int, **savefig_kwargs) -> str:
    """Draw the matplotlib figure ``fig`` as a PNG (``dpi``, ``savefig_kwargs`` as
    ``Figure.savefig``'s) and write it to ``path`` through :func:`shrink_png`; returns ``path``."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, **savefig_kwargs)
    with open(path, "wb") as f:
        f.write(shrink_png(buf.getvalue()))
    return path
