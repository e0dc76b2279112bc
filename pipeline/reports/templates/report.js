document.documentElement.classList.add("js");
function openTo(id){
  for(var n=document.getElementById(id);n;n=n.parentElement){if(n.tagName==="DETAILS")n.open=true;}}
function onHash(){if(location.hash.length>1)openTo(decodeURIComponent(location.hash.slice(1)));}
window.addEventListener("hashchange",onHash);onHash();
document.querySelectorAll("section.item .tools").forEach(function(tools){
  [["open all iterations",true],["close all",false]].forEach(function(spec){
    var b=document.createElement("button");b.type="button";b.textContent=spec[0];
    b.addEventListener("click",function(){tools.parentElement.querySelectorAll("details.iteration")
      .forEach(function(d){d.open=spec[1];});});tools.appendChild(b);});});
