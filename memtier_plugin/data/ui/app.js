// memtier ui: every stored text is untrusted and is written with textContent only (never innerHTML).
'use strict';

const TOKEN = new URLSearchParams(location.search).get('token') || '';
const main = document.getElementById('main');
const statusLine = document.getElementById('status');
let current = 'episodes';
let lastSearch = null;

async function api(path, body) {
  const opt = { headers: { 'X-Memtier-Token': TOKEN }, cache: 'no-store' };
  if (body !== undefined) {
    opt.method = 'POST';
    opt.headers['Content-Type'] = 'application/json';
    opt.body = JSON.stringify(body);
  }
  const r = await fetch('/api/' + path, opt);
  let data;
  try { data = await r.json(); } catch (e) { data = { error: 'HTTP ' + r.status }; }
  if (!r.ok) throw new Error(data.error || ('HTTP ' + r.status));
  return data;
}

// el('div', {className: 'x', title: 't'}, 'text', child...): properties only; strings become text nodes.
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k.startsWith('data-')) node.setAttribute(k, String(v));
    else node[k] = v;
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function say(text, isError) {
  statusLine.textContent = text || '';
  statusLine.className = isError ? 'error' : '';
}

function num(x, digits) {
  return (typeof x === 'number' && isFinite(x)) ? x.toFixed(digits) : '–';
}

function problems(list) {
  if (!list || !list.length) return null;
  return el('details', { className: 'left-out' }, el('summary', {}, list.length + ' unreadable line(s) skipped'),
    ...list.map((p) => el('div', {}, p)));
}

// Forget (two steps, no dialog) and, for facts and standing items, correct.
function actions(id, canCorrect) {
  const box = el('div', { className: 'actions' });
  const forget = el('button', { className: 'forget', type: 'button' }, 'Forget');
  forget.addEventListener('click', () => {
    forget.hidden = true;
    const yes = el('button', { className: 'confirm-forget', type: 'button' }, 'Forget ' + id + ' for good');
    const no = el('button', { className: 'cancel', type: 'button' }, 'Keep');
    yes.addEventListener('click', async () => {
      yes.disabled = true;
      try {
        const res = await api('forget', { ids: [id] });
        if (res.unknown && res.unknown.length) throw new Error('not found, nothing forgotten: ' + res.unknown.join(', '));
        const done = [...res.forgotten, ...res.derived].map((f) => f.id);
        say(done.length ? 'forgot ' + done.join(', ') + (res.derived.length ? ' (with what was derived only from it)' : '')
          : 'already forgotten: ' + res.already.join(', '));
        await show(current);
      } catch (e) { say(e.message, true); yes.disabled = false; }
    });
    no.addEventListener('click', () => { yes.remove(); no.remove(); forget.hidden = false; });
    box.append(yes, no);
  });
  box.append(forget);
  if (canCorrect) {
    const fix = el('button', { className: 'correct', type: 'button' }, 'Correct');
    fix.addEventListener('click', () => {
      fix.hidden = true;
      const input = el('input', { className: 'correct-text', type: 'text', placeholder: 'what is true now' });
      const save = el('button', { className: 'save-correct', type: 'button' }, 'Save');
      save.addEventListener('click', async () => {
        if (!input.value.trim()) return;
        try {
          const res = await api('correct', { id, text: input.value });
          say('corrected ' + res.old + ' → ' + res.new);
          await show(current);
        } catch (e) { say(e.message, true); }
      });
      box.append(input, save);
      input.focus();
    });
    box.append(fix);
  }
  return box;
}

function item(row, meta, canCorrect, extraClass) {
  return el('div', { className: 'item' + (extraClass ? ' ' + extraClass : ''), 'data-id': row.id },
    el('div', { className: 'meta' }, el('span', { className: 'id' }, row.id), ...meta.filter(Boolean).map((m) => el('span', {}, m))),
    el('p', { className: 'content' }, row.content),
    actions(row.id, canCorrect));
}

// A revision chain, oldest first: the last is current, the ones before it are shown retired.
function chainBox(chain, meta, canCorrect) {
  return el('div', { className: 'chain' }, ...chain.map((x, i) => {
    const last = i === chain.length - 1;
    return item(x, [...meta(x), last ? 'current' : 'superseded'], canCorrect && last, last ? '' : 'retired');
  }));
}

const VIEWS = {
  async episodes() {
    const d = await api('episodes');
    const out = [el('h2', {}, 'Episodes by agent and session')];
    if (!d.agents.length) out.push(el('p', {}, 'No episodes yet.'));
    for (const a of d.agents) {
      out.push(el('h2', {}, 'agent ' + a.agent_id));
      for (const s of a.sessions) {
        out.push(el('h3', {}, 'session ' + (s.session_id || '(none)') + ' · ' + s.entries.length + ' entries'));
        for (const e of s.entries) {
          out.push(item(e, [e.timestamp, e.role, e.project && ('project ' + e.project),
            e.promoted && (e.fact_ids.length ? 'facts ' + e.fact_ids.join(', ') : 'promoted'), e.cognitive_weight ? 'cw ' + e.cognitive_weight : '']));
        }
      }
    }
    if (d.left_out) out.push(el('p', { className: 'left-out' }, d.left_out + ' older entries not shown'));
    out.push(problems(d.problems));
    return out;
  },
  async facts() {
    const d = await api('facts');
    const out = [el('h2', {}, 'Facts with their revision chains (oldest first; the last is current)')];
    if (!d.projects.length) out.push(el('p', {}, 'No facts yet.'));
    for (const p of d.projects) {
      out.push(el('h2', {}, 'project ' + (p.project || '(none)')));
      for (const chain of p.chains) {
        out.push(chainBox(chain, (f) => [f.timestamp, f.fact_kind, f.attribute,
          f.supersedes && ('revises ' + f.supersedes), f.sources.length ? 'from ' + f.sources.join(', ') : ''], true));
      }
    }
    out.push(problems(d.problems));
    return out;
  },
  async global() {
    const d = await api('global');
    const out = [el('h2', {}, 'Global layer: the topic tree and its standing items')];
    if (!d.topics.length) out.push(el('p', {}, 'No standing knowledge yet.'));
    for (const t of d.topics) {
      const box = el('div', { className: 'topic' }, el('h3', {}, t.topic));
      box.style.setProperty('--depth', String(t.depth));
      for (const n of t.items) {
        box.append(item(n, [n.kind, n.attribute, n.timestamp,
          'projects ' + (Array.isArray(n.projects) ? n.projects.join(', ') : n.projects),
          n.said_for ? 'said for: ' + n.said_for : '',
          n.asked ? 'said when asked: ' + n.asked : '',
          n.retired_by ? 'retired by ' + n.retired_by : 'current'], !n.retired_by, n.retired_by ? 'retired' : ''));
      }
      out.push(box);
    }
    out.push(problems(d.problems));
    return out;
  },
  async workspace() {
    const d = await api('workspace');
    const out = [el('h2', {}, 'Workspace layer: skills and working state by project')];
    if (!d.projects.length) out.push(el('p', {}, 'No skills or working state yet.'));
    for (const p of d.projects) {
      out.push(el('h2', {}, 'project ' + (p.project || '(none)')));
      out.push(el('h3', {}, p.skills.length + ' skill(s)'));
      for (const chain of p.skills) {
        out.push(chainBox(chain, (s) => [s.timestamp, 'worked ' + s.count + '×'], false));
      }
      if (p.state) {
        const st = p.state;
        out.push(el('h3', {}, 'working state'));
        out.push(item({ id: st.id, content: st.progress }, [st.timestamp, 'session ' + st.session_id,
          st.pending.length ? 'pending: ' + st.pending.join(' · ') : '',
          st.artifacts.length ? 'artifacts: ' + st.artifacts.join(', ') : ''], false));
      }
    }
    return out;
  },
  async search() {
    const q = el('input', { id: 'q', type: 'search', placeholder: 'what the agent would be asked', value: lastSearch ? lastSearch.q : '' });
    const agent = el('input', { id: 'agent', type: 'text', value: lastSearch ? lastSearch.agent : 'main', size: 10, title: 'search as this agent' });
    const project = el('input', { id: 'project', type: 'text', value: lastSearch ? lastSearch.project : '', size: 10, placeholder: 'every project' });
    const go = el('button', { id: 'search-go', type: 'submit' }, 'Search');
    const results = el('div', { id: 'results' });
    const form = el('form', { className: 'search' }, q, 'agent', agent, 'project', project, go);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      lastSearch = { q: q.value, agent: agent.value, project: project.value };
      await runSearch(results);
    });
    if (lastSearch && lastSearch.q) runSearch(results);
    return [el('h2', {}, 'Search: what before_prompt_build would deliver, and why'), form, results];
  },
  async traces() {
    const d = await api('traces');
    const out = [el('h2', {}, 'Traced prompts: what was delivered and why, what was left out')];
    if (!d.traces.length) out.push(el('p', {}, 'No traced prompts yet.'));
    for (const t of d.traces) {
      const box = el('details', { className: 'trace item' },
        el('summary', {}, t.timestamp + ' · ' + t.agent_id + ' · session ' + (t.session_id || '(none)') + ' · '
          + t.delivered.length + ' delivered · ', el('q', {}, t.query)));
      box.append(el('div', { className: 'meta' }, el('span', {}, 'run ' + t.run_id), el('span', {}, 'mode ' + t.mode),
        el('span', {}, t.tokens + ' tokens'), el('span', {}, num(t.elapsed_ms, 1) + ' ms')));
      const rows = t.delivered.map((h) => el('tr', {},
        el('td', {}, h.id, h.forgotten ? el('span', { className: 'badge gone' }, ' forgotten') : null),
        el('td', {}, h.tier), el('td', {}, num(h.probability, 3)), el('td', {}, num(h.score, 3)),
        el('td', { className: 'signals' }, Object.entries(h.signals).map(([k, v]) => k + '=' + num(v, 2)).join(' ')),
        el('td', { className: 'content' }, h.forgotten ? '' : (h.content === null ? '(not found)' : h.content))));
      box.append(el('table', {}, el('tr', {}, ...['delivered', 'tier', 'p', 'score', 'signals', 'text'].map((c) => el('th', {}, c))), ...rows));
      if (t.left_out.length) box.append(el('div', { className: 'left-out' }, el('b', {}, 'left out'),
        ...t.left_out.map((w) => el('div', {}, w))));
      out.push(box);
    }
    if (d.traces.length) out[1].open = true;  // the newest prompt, opened
    out.push(problems(d.problems));
    return out;
  },
};

function explainTable(h) {
  const rows = Object.entries(h.signals).map(([name, s]) => {
    const value = typeof s === 'object' ? s.value : s;
    const weight = typeof s === 'object' ? s.weight : undefined;
    const contrib = typeof s === 'object' && 'contribution' in s ? s.contribution : (value * weight);
    return el('tr', {}, el('td', {}, name), el('td', {}, num(value, 3)), el('td', {}, num(weight, 3)), el('td', {}, num(contrib, 3)));
  });
  if (h.rerank !== null && h.rerank !== undefined) rows.push(el('tr', {}, el('td', {}, 'rerank'), el('td', {}, num(h.rerank, 3)), el('td', {}, ''), el('td', {}, '')));
  return el('table', { className: 'explain' },
    el('tr', {}, ...['signal', 'value', 'weight', 'contribution'].map((c) => el('th', {}, c))), ...rows);
}

async function runSearch(results) {
  results.replaceChildren(el('p', {}, 'searching…'));
  const s = lastSearch;
  const params = new URLSearchParams({ q: s.q, agent: s.agent || 'main' });
  if (s.project) params.set('project', s.project);
  try {
    const d = await api('search?' + params.toString());
    const out = [el('p', { className: 'meta' }, 'mode ' + d.mode + ' · ' + d.hits.length + ' delivered · '
      + d.tokens + ' tokens · ' + num(d.elapsed_ms, 1) + ' ms')];
    if (!d.hits.length) out.push(el('p', { id: 'no-hits' }, 'No memory matches.'));
    d.hits.forEach((h, i) => {
      const box = item(h, ['#' + (i + 1), h.layer + (h.standing ? ' · standing ' + h.role : ''),
        'p ' + num(h.probability, 3), 'score ' + num(h.score, 3), h.timestamp,
        h.session_id && ('session ' + h.session_id), h.route.length ? 'route ' + h.route.join(', ') : ''],
        h.layer === 'global' || h.layer === 'semantic', 'hit');
      box.append(el('details', { className: 'why' }, el('summary', {}, 'why: every signal'), explainTable(h),
        el('p', { className: 'left-out' }, 'score = Σ value × weight (tier: value is μ − 1); p: the calibrated '
          + 'probability that it applies; the block takes the best above the threshold.')));
      out.push(box);
    });
    if (d.left_out.length) out.push(el('div', { className: 'left-out' }, el('b', {}, 'left out'),
      ...d.left_out.map((w) => el('div', {}, w))));
    results.replaceChildren(...out);
  } catch (e) { results.replaceChildren(); say(e.message, true); }
}

async function show(name) {
  current = name;
  for (const b of document.querySelectorAll('#tabs button')) b.classList.toggle('active', b.dataset.view === name);
  try {
    const nodes = await VIEWS[name]();
    main.replaceChildren(...nodes.filter(Boolean));
    main.dataset.view = name;
  } catch (e) { say(e.message, true); }
}

for (const b of document.querySelectorAll('#tabs button')) {
  b.addEventListener('click', () => { say(''); show(b.dataset.view); });
}
show(current);
