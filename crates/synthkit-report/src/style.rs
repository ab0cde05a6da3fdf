//! The page's inline style and script. The script only adds niceties (opening and
//! closing every level, opening the boxes around a linked target); everything works
//! without it.

/// The page's CSS.
pub(crate) const STYLE: &str = r#"
:root{--fg:#1d232b;--mute:#5b6675;--line:#d5dbe3;--box:#f4f6f9;--acc:#2757c7;--good:#1b7a3d;--bad:#b3261e}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);margin:0 auto;max-width:1200px;padding:1rem 1.5rem 4rem;background:#fff}
h1{font-size:1.3rem;margin:.2rem 0}h2{font-size:1.15rem;border-bottom:2px solid var(--line);padding-bottom:.2rem;margin-top:2rem}h3{font-size:1rem;margin:.2rem 0}
a{color:var(--acc)}
.query{font-size:1.1rem;font-weight:600;margin:.3rem 0;white-space:pre-wrap}
.meta{margin:.3rem 0;display:flex;flex-wrap:wrap;gap:.35rem}
.tag{display:inline-block;border:1px solid var(--line);border-radius:999px;padding:0 .55rem;font-size:.85rem;background:#fff}
.tag.good{border-color:var(--good);color:var(--good)}.tag.bad{border-color:var(--bad);color:var(--bad)}
nav a{margin-right:.8rem}
.note{color:var(--mute)}
.failed{border-left:4px solid var(--bad);background:#fbeceb;padding:.6rem 1rem;border-radius:4px;white-space:pre-wrap}
.answer{white-space:pre-wrap;background:var(--box);border-left:4px solid var(--acc);padding:.7rem 1rem;border-radius:4px}
a.cite{font-weight:600;text-decoration:none;background:#e3ebfb;border-radius:3px;padding:0 .15rem}
.level{border:1px solid var(--line);border-radius:6px;padding:.4rem .6rem;margin:.3rem 0;background:#fbfcfd}
.level>summary{cursor:pointer;font-weight:600;color:var(--mute)}
.row{display:flex;flex-wrap:wrap;gap:.45rem;align-items:flex-start;margin-top:.45rem}
.arrow{align-self:center;color:var(--mute);font-size:1.1rem}
.up,.join{text-align:center;color:var(--mute)}
.join{border:1px dashed var(--line);border-radius:6px;padding:.3rem}
.call{border:1px solid #9fb2d6;border-radius:6px;background:#fff;min-width:11rem;max-width:100%}
.call>summary{cursor:pointer;padding:.3rem .5rem;font-size:.85rem;list-style:none;display:flex;flex-wrap:wrap;gap:.3rem}
.call>summary::-webkit-details-marker{display:none}
.call[open]{flex-basis:100%}
.call.warn{border-color:#d79b2a}.call.cut{border-color:var(--bad);border-width:2px}
.call:target,.source:target{outline:3px solid var(--acc)}
.body{padding:.3rem .7rem .6rem;border-top:1px solid var(--line);font-size:.9rem}
pre{white-space:pre-wrap;word-break:break-word;background:var(--box);padding:.5rem;border-radius:4px;margin:.3rem 0;font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;max-height:24rem;overflow:auto}
.more{color:var(--mute);font-style:italic}
ul.nodes{margin:.2rem 0 .4rem;padding-left:1.2rem}img.thumb{max-width:96px;max-height:96px;vertical-align:middle;border:1px solid var(--mute)}span.thumb.none{color:var(--mute);font-size:.85em}ul.nodes small{color:var(--mute)}
.source{border:1px solid var(--line);border-radius:6px;padding:.4rem .7rem;margin:.45rem 0}
.source.cited{border-left:4px solid var(--good)}
table{border-collapse:collapse;font-size:.88rem}td,th{border-bottom:1px solid var(--line);padding:.2rem .6rem;text-align:left;vertical-align:top}
.bar{display:inline-block;width:10rem;height:.7rem;background:var(--box);border:1px solid var(--line);vertical-align:middle}
.bar>span{display:block;height:100%;background:var(--acc)}
.js{display:none}.has-js .js{display:inline}
"#;

/// The page's script: optional niceties.
pub(crate) const SCRIPT: &str = r#"
(function(){
  document.body.classList.add('has-js');
  function reveal(){
    var id=decodeURIComponent(location.hash.slice(1));
    var el=id&&document.getElementById(id);
    for(var p=el;p;p=p.parentElement){if(p.tagName==='DETAILS'){p.open=true;}}
    if(el){el.scrollIntoView({block:'center'});}
  }
  window.addEventListener('hashchange',reveal);reveal();
  document.querySelectorAll('button[data-open]').forEach(function(b){
    b.addEventListener('click',function(){
      var open=b.getAttribute('data-open')==='1';
      document.querySelectorAll('details.level').forEach(function(d){d.open=open;});
    });
  });
})();
"#;
