"""The machine map's stylesheet, inlined into every page (no file, font or script from
outside): boxes nest and wrap with flexbox, CPU cells have a fixed size so 512 CPUs
stay legible, and colours survive printing."""

from __future__ import annotations

# One background per CPU use; the legend's swatches use the same classes, so the
# browser tests can compare each CPU's computed colour with its legend entry.
STYLE = """
:root{--x:#f2a553;--s:#c3e6b9;--r:#a9bde6;--i:#dcc3ee;--o:#d2d2d2;--m:#fbe7a6;
font:12px/1.3 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif;
color:#111;background:#fff}
*{box-sizing:border-box}
body{margin:8px}
h1{font-size:17px;margin:0 0 4px}
h2,h3{font-size:12px;margin:0 0 3px;overflow-wrap:anywhere}
h2 small,h3 small{font-weight:normal;color:#333}
p{margin:0 0 4px;overflow-wrap:anywhere}
.meta{color:#333}
.note{color:#8a1c00}
.legend{display:flex;flex-wrap:wrap;gap:4px 16px;list-style:none;padding:0;margin:6px 0 10px}
.legend li{display:flex;align-items:center;gap:5px}
.sw{display:inline-block;width:24px;height:14px;border:1px solid #666;flex:none}
.box{border:1px solid #777;border-radius:4px;padding:4px 6px 6px;min-width:0;background:#fff}
.machine{background:#fafafa}
.row{display:flex;gap:8px;align-items:stretch;margin-bottom:8px}
.socket{flex:1 1 auto;background:#f4f4f4}
.kids{display:flex;flex-wrap:wrap;gap:6px}
.kids>.box{flex:1 1 240px}
.mem{flex:0 0 150px;background:var(--m)}
.sw.m{background:var(--m)}
.cap{font-size:11px;color:#333}
.cores{display:flex;flex-wrap:wrap;gap:3px}
.core{display:grid;grid-template-rows:13px 23px;grid-auto-columns:54px;gap:0 1px;padding:1px;
border:1px solid #444;border-radius:3px;background:#fff}
.core.e{border-style:dashed}
.core.f{border-width:2px}
.cpu{grid-row:1/3;width:54px;height:36px;padding:1px 3px;overflow:hidden;font-size:10px;
line-height:11px;font-weight:bold;border-radius:2px}
.cpu i{display:block;font-style:normal;font-weight:normal;white-space:nowrap;overflow:hidden;
text-overflow:ellipsis}
.who{grid-row:2;z-index:1;min-width:0;padding:0 3px;overflow:hidden;font-size:10px;
line-height:11px}
.who span{display:block;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.x{background:var(--x)}
.s{background:var(--s)}
.r{background:var(--r)}
.i{background:var(--i)}
.iso{box-shadow:inset 0 -4px 0 var(--i)}
.o{background-color:var(--o);
background-image:repeating-linear-gradient(135deg,transparent 0 4px,#f4f4f4 4px 7px)}
.offline .cores{margin-top:2px}
.ctrs{display:flex;flex-wrap:wrap;gap:2px 4px;list-style:none;margin:4px 0 0;padding:0}
.ctrs li{max-width:100%;padding:0 5px;border:1px solid #6c9a60;border-radius:8px;
font-size:10px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;background:var(--s)}
.ctrs.rsv li{border-color:#6479a8;background:var(--r)}
@media print{
 *{-webkit-print-color-adjust:exact;print-color-adjust:exact}
 body{margin:0}
 .core,.ctrs li,.mem{break-inside:avoid}
}
@page{size:landscape;margin:8mm}
"""
