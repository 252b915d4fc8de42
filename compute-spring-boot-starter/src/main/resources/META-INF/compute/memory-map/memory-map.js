// The memory map page: draws what the computememory Actuator endpoint returns, for every manager it lists. Plain
// JavaScript, no libraries.
//
// The page is the computememorymap endpoint, {management base path}/computememorymap, so the base path is its own
// path less the last segment. The Actuator links at the base path say whether the computememory endpoint is exposed,
// and under which path (a path-mapping may rename it); where the links are switched off the page tries
// {base}/computememory directly. An OPTIONS request tells whether the write operation (trim) is there: its Allow
// header lists POST only then.
'use strict';

(function () {
  const BASE = window.location.pathname.replace(/\/[^/]*\/?$/, '');
  const SVG = 'http://www.w3.org/2000/svg';

  const state = {
    endpoint: null,       // the endpoint's path, once found
    trimProbed: false,
    timer: null,
    interval: 2000,
    drawn: new Map(),     // manager/location -> the JSON of the segments last drawn, so an unchanged map is not redrawn
    mouse: null,          // the last mouse position, to keep the tooltip true across redraws
  };

  const $ = (id) => document.getElementById(id);

  // --- formatting ------------------------------------------------------------------------------------------------

  function bytes(n) {
    if (n === null || n === undefined || n < 0) return 'unknown';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let value = n;
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit++;
    }
    return unit === 0 ? `${n} B` : `${value.toFixed(value < 10 ? 2 : 1)} ${units[unit]}`;
  }

  const exact = (n) => `${n.toLocaleString('en-US')} B`;
  const ratio = (x) => x.toFixed(3);
  const percent = (x) => `${(x * 100).toFixed(1)} %`;

  function el(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes || {})) {
      if (key === 'class') node.className = value;
      else if (key === 'dataset') Object.assign(node.dataset, value);
      else node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  function svg(tag, attributes) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
    return node;
  }

  // --- messages ----------------------------------------------------------------------------------------------------

  function showMessage(html) {
    const box = $('message');
    box.innerHTML = html;   // only ever the page's own text, never data from the endpoint
    box.hidden = false;
  }

  function clearMessage() {
    $('message').hidden = true;
  }

  function notExposed() {
    showMessage('The <code>computememory</code> endpoint is not exposed over HTTP, so there is nothing to draw. '
      + 'Expose it beside this page, e.g. <code>management.endpoints.web.exposure.include=health,computememory,computememorymap</code>, '
      + 'Its default access, <code>read-only</code>, is enough to draw; the trim buttons need '
      + '<code>management.endpoint.computememory.access=unrestricted</code>. This page retries every few seconds.');
    $('device').textContent = 'computememory endpoint not exposed';
  }

  function refused(status) {
    showMessage(`The <code>computememory</code> endpoint answered HTTP ${status}: this browser session is not allowed to `
      + 'read it. Sign in to the application (or grant this user access to the Actuator endpoint) and reload the page.');
  }

  // --- talking to the endpoint -------------------------------------------------------------------------------------

  async function findEndpoint() {
    try {
      const response = await fetch(BASE || '/', { headers: { Accept: 'application/json' }, cache: 'no-store' });
      if (response.ok) {
        const links = (await response.json())._links;
        if (links) {
          if (!links.computememory) return null;
          return new URL(links.computememory.href, window.location.href).pathname;
        }
      }
    } catch (e) {
      // no links (discovery switched off, or not JSON): try the default path below
    }
    return `${BASE}/computememory`;
  }

  async function probeTrim() {
    state.trimProbed = true;
    try {
      const response = await fetch(state.endpoint, { method: 'OPTIONS' });
      const allow = (response.headers.get('Allow') || '').toUpperCase().split(/\s*,\s*/);
      const writable = response.ok && allow.includes('POST');
      $('trim').hidden = !writable;
      $('release').hidden = !writable;
    } catch (e) {
      state.trimProbed = false;   // try again on the next refresh
    }
  }

  // The CSRF token of Spring Security's CookieCsrfTokenRepository (XSRF-TOKEN, readable by the page with
  // csrf.spa()), as the header it checks on a POST; null where the application sets no such cookie.
  function csrfHeader() {
    const cookie = document.cookie.split(/;\s*/).find((c) => c.startsWith('XSRF-TOKEN='));
    return cookie ? { 'X-XSRF-TOKEN': decodeURIComponent(cookie.substring('XSRF-TOKEN='.length)) } : null;
  }

  async function trim(all) {
    const result = $('trim-result');
    result.textContent = all ? 'releasing all cached memory…' : 'trimming…';
    try {
      const post = (csrf) => fetch(state.endpoint, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json', ...csrf },
        body: all ? '{"all": true}' : '{}',
      });
      const sent = csrfHeader();
      let response = await post(sent);
      // Spring Security makes its cookie token (csrf.spa()) on the first request that needs one, and refuses that
      // request: sent once it is there
      if (response.status === 403 && !sent && csrfHeader()) response = await post(csrfHeader());
      if (!response.ok) {
        result.textContent = `trim refused: HTTP ${response.status}` + (response.status === 403
          ? ' (where Spring Security checks CSRF, give the actuator\'s chain csrf.spa(): see the starter\'s README)' : '');
        return;
      }
      const released = await response.json();
      result.textContent = `released ${bytes(released.releasedBytes)} at ${new Date().toLocaleTimeString()}`;
      await refresh(false);
    } catch (e) {
      result.textContent = `trim failed: ${e.message}`;
    }
  }

  async function refresh(reschedule) {
    try {
      await load();
    } catch (e) {
      showMessage(`Cannot reach the application: ${e.message.replace(/[<>&]/g, '')}. This page retries every few seconds.`);
    } finally {
      if (reschedule !== false) schedule();
    }
  }

  function schedule() {
    clearTimeout(state.timer);
    if (state.interval > 0) state.timer = setTimeout(() => refresh(), state.interval);
  }

  async function load() {
    const started = Date.now();
    if (!state.endpoint) {
      state.endpoint = await findEndpoint();
      if (!state.endpoint) {
        notExposed();
        return;
      }
    }
    const response = await fetch(state.endpoint, { headers: { Accept: 'application/json' }, cache: 'no-store' });
    if (response.status === 404) {
      state.endpoint = null;
      notExposed();
      return;
    }
    if (response.status === 401 || response.status === 403) {
      refused(response.status);
      return;
    }
    if (!response.ok) {
      showMessage(`The <code>computememory</code> endpoint answered HTTP ${response.status}.`);
      return;
    }
    const listing = await response.json();
    const managers = await Promise.all(Object.keys(listing.managers).map(async (name) => {
      const path = `${state.endpoint}/${encodeURIComponent(name)}`;
      const [summary, ...details] = await Promise.all([path, ...listing.managers[name].locations
        .map((location) => `${path}/${location.toLowerCase()}`)].map(getJson));
      return summary ? { summary, details: details.filter((d) => d !== null) } : null;
    }));
    clearMessage();
    render(managers.filter((m) => m !== null), listing.definitions || {});
    if (!state.trimProbed) await probeTrim();
    $('status').textContent = `updated ${new Date().toLocaleTimeString()}`;
    // when the data now drawn was asked for (epoch milliseconds): what was freed before this instant shows as free
    document.body.dataset.fetched = String(started);
  }

  async function getJson(path) {
    const response = await fetch(path, { headers: { Accept: 'application/json' }, cache: 'no-store' });
    return response.ok ? response.json() : null;
  }

  // --- drawing -----------------------------------------------------------------------------------------------------

  function describeDevice(summary) {
    const device = summary.device;
    const memory = device.totalBytes > 0
      ? ` · ${bytes(device.totalBytes)} total, ${device.freeBytes >= 0 ? bytes(device.freeBytes) : 'unknown'} free`
      : '';
    return `backend ${summary.backend} · device ${device.index}: ${device.name}${memory}`;
  }

  const leakText = (detected) => `${detected} ${detected === 1 ? 'leak' : 'leaks'} detected`;

  function render(managers, definitions) {
    const several = managers.length > 1;
    document.body.classList.toggle('several', several);
    $('device').textContent = several
      ? `${managers.length} managers: ${managers.map((m) => `${m.summary.name} (${m.summary.backend})`).join(', ')}`
      : (managers.length === 1 ? describeDevice(managers[0].summary) : 'no managers');
    const detected = managers.reduce((sum, m) => sum + m.summary.leaks.detected, 0);
    const leaks = $('leaks');
    leaks.hidden = managers.length === 0;
    leaks.textContent = leakText(detected);
    leaks.title = definitions.leaks || '';
    leaks.classList.toggle('warn', detected > 0);

    const main = $('managers');
    for (const { summary, details } of managers) {
      let section = main.querySelector(`section.manager[data-manager="${CSS.escape(summary.name)}"]`);
      if (!section) {
        section = el('section', { class: 'manager', dataset: { manager: summary.name } });
        main.append(section);
      }
      drawManager(section, summary, details, definitions);
    }
    const shown = new Set(managers.map((m) => m.summary.name));
    for (const section of main.querySelectorAll('section.manager')) {
      if (!shown.has(section.dataset.manager)) section.remove();
    }

    // a redraw replaces the blocks: the tooltip describes whatever block is now under the mouse
    if (!$('tooltip').hidden && state.mouse) hover(state.mouse);

    const list = $('definitions');
    if (!list.childElementCount) {
      for (const [name, text] of Object.entries(definitions)) {
        list.append(el('dt', null, name), el('dd', null, text));
      }
    }
  }

  function drawManager(section, summary, details, definitions) {
    const title = el('div', { class: 'manager-title' },
      el('h2', null, summary.name, summary.primary ? el('span', { class: 'tag' }, 'primary') : null,
        summary.closed ? el('span', { class: 'tag closed', title: 'its figures are what its close left' }, 'closed') : null),
      el('span', { class: 'device' }, describeDevice(summary)),
      el('span', { class: `leaks${summary.leaks.detected > 0 ? ' warn' : ''}` }, leakText(summary.leaks.detected)));
    const locations = details.map((detail) => {
      let location = section.querySelector(`section.location[data-location="${detail.location}"]`);
      if (!location) location = el('section', { class: 'location', dataset: { manager: summary.name, location: detail.location } });
      drawLocation(location, detail, detail.location === summary.defaultLocation, definitions);
      return location;
    });
    section.replaceChildren(title, ...locations);
  }

  function drawLocation(section, detail, isDefault, definitions) {
    const s = detail.summary;
    const idle = detail.segments.length === 0 && s.reservedBytesPeak === 0;
    section.classList.toggle('idle', idle);

    const title = el('h2', null, detail.location, isDefault ? el('span', { class: 'tag' }, 'default') : null);
    const figures = el('dl', { class: 'figures' },
      figure('live buffers', String(s.liveBuffers)),
      figure('allocated (live)', bytes(s.allocatedBytes), `in blocks handed to buffers; requested ${exact(s.requestedBytes)}`),
      figure('peak allocated', bytes(s.allocatedBytesPeak)),
      figure('cached (free)', bytes(s.cachedBytes)),
      // neither allocated nor cached until the view lets go: without it the figures would not add up to reserved
      s.heldBytes > 0
        ? figure('held', bytes(s.heldBytes), `${s.heldBuffers} closed ${s.heldBuffers === 1 ? 'buffer' : 'buffers'} whose memory waits `
          + 'for another thread\'s view', 'held')
        : null,
      figure('reserved', bytes(s.reservedBytes), 'taken from the backend: allocated + cached + held', 'reserved'),
      figure('peak reserved', bytes(s.reservedBytesPeak)),
      figure('largest free block', bytes(s.largestFreeBlockBytes), 'the largest a request outside budgets\' reservations can take'),
      s.reservationsCachedBytes > 0
        ? figure('cached for reservations', bytes(s.reservationsCachedBytes), 'free in budgets\' reservations: only requests under those budgets take it')
        : null,
      figure('segments', String(s.segments)),
      figure('hit rate', percent(s.hitRate), definitions.hitRate),
      figure('fragmentation', ratio(s.fragmentation), definitions.fragmentation, 'fragmentation', s.fragmentation > 0.5),
      figure('overhead', `${s.overhead.toFixed(2)}×`, definitions.overhead, 'overhead'));

    // the segments are redrawn only when they changed, so a block under the mouse stays put between refreshes
    const key = JSON.stringify(detail.segments);
    const drawnAs = `${detail.manager}/${detail.location}`;
    let map = section.querySelector('.segments');
    if (!map || state.drawn.get(drawnAs) !== key) {
      map = drawSegments(detail);
      state.drawn.set(drawnAs, key);
    }

    section.replaceChildren(title, figures, map, idle ? el('p', { class: 'none' }, 'Nothing reserved here yet.') : drawTimeline(detail.timeline));
  }

  function figure(label, value, hint, name, warn) {
    const attributes = { class: warn ? 'warn' : '' };
    if (hint) attributes.title = hint;
    if (name) attributes.dataset = { figure: name };
    return el('div', attributes, el('dt', null, label), el('dd', null, value));
  }

  function mappedExtent(segment) {
    if (segment.blocksLeftOut > 0) {
      // the endpoint listed only the first blocks: the bar ends where the last one listed does
      const last = segment.blocks[segment.blocks.length - 1];
      return last ? last.offsetBytes + last.sizeBytes : 0;
    }
    let end = segment.sizeBytes;
    for (let i = segment.blocks.length - 1; i >= 0 && segment.blocks[i].state === 'UNMAPPED'; i--) {
      end = segment.blocks[i].offsetBytes;
    }
    return end;
  }

  function drawSegments(detail) {
    const container = el('div', { class: 'segments' });
    if (detail.segments.length === 0) {
      container.append(el('p', { class: 'none' }, 'No segments: the pool holds no memory at this location.'));
      return container;
    }
    const widest = Math.max(1, ...detail.segments.map(mappedExtent));
    for (const segment of detail.segments) {
      const extent = mappedExtent(segment);
      const tail = segment.sizeBytes - extent;
      const live = segment.blocks.filter((b) => b.state === 'LIVE').length;
      const leftOut = segment.blocksLeftOut;
      const label = `segment ${segment.index} · ${bytes(segment.sizeBytes)}`
        + (segment.expandable && leftOut === 0 ? ` address range, ${bytes(extent)} mapped` : '')
        + ` · ${segment.blocks.length + leftOut} blocks, ${live} live`
        + (leftOut > 0 ? ` among the ${segment.blocks.length} shown` : '');
      const bar = el('div', { class: 'bar', style: `width: calc((100% - 56px) * ${extent / widest})` });
      for (const block of segment.blocks) {
        if (block.offsetBytes >= extent) break;
        bar.append(el('div', {
          class: `block ${block.state}`,
          style: `left: ${(block.offsetBytes / Math.max(1, extent)) * 100}%; width: ${(block.sizeBytes / Math.max(1, extent)) * 100}%`,
          dataset: {
            manager: detail.manager,
            location: detail.location,
            segment: segment.index,
            offset: block.offsetBytes,
            size: block.sizeBytes,
            requested: block.requestedBytes,
            state: block.state,
            site: block.allocationSite || '',
          },
        }));
      }
      const row = el('div', { class: 'segment-row' }, bar, leftOut > 0
        ? el('div', { class: 'tail', title: 'blocks beyond the most the endpoint lists for a location (maxBlocks)' },
          `+${leftOut} blocks not shown`)
        : tail > 0 ? el('div', { class: 'tail', title: `${exact(tail)} of address range without pages` }, `+${bytes(tail)}`) : null);
      container.append(el('div', { class: 'segment', dataset: { segment: segment.index } },
        el('div', { class: 'segment-label' }, label), row));
    }
    return container;
  }

  function drawTimeline(timeline) {
    const box = el('div', { class: 'timeline' }, el('h3', null, 'Reserved, live and cached bytes over time'));
    if (!timeline || timeline.length === 0) {
      box.append(el('p', { class: 'none' }, 'No samples yet (compute.memory.timeline.interval=0 switches sampling off).'));
      return box;
    }
    const width = 1000;
    const height = 170;
    const left = 70;
    const right = 10;
    const top = 10;
    const bottom = 24;
    const first = timeline[0].epochMillis;
    const last = timeline[timeline.length - 1].epochMillis;
    const span = Math.max(1, last - first);
    const peak = Math.max(1, ...timeline.map((t) => Math.max(t.reservedBytes, t.allocatedBytes, t.cachedBytes)));
    const x = (t) => left + ((t - first) / span) * (width - left - right);
    const y = (v) => top + (1 - v / peak) * (height - top - bottom);

    const chart = svg('svg', { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: 'none', role: 'img',
      'aria-label': 'timeline of reserved, live and cached bytes' });
    for (const f of [0, 0.5, 1]) {
      chart.append(svg('line', { class: f === 0 ? 'axis' : 'grid', x1: left, x2: width - right, y1: y(peak * f), y2: y(peak * f) }));
      const label = svg('text', { x: left - 6, y: y(peak * f) + 4, 'text-anchor': 'end' });
      label.textContent = bytes(Math.round(peak * f));
      chart.append(label);
    }
    const since = svg('text', { x: left, y: height - 6 });
    since.textContent = `${new Date(first).toLocaleTimeString()} (${Math.round(span / 1000)} s, ${timeline.length} samples)`;
    const until = svg('text', { x: width - right, y: height - 6, 'text-anchor': 'end' });
    until.textContent = new Date(last).toLocaleTimeString();
    chart.append(since, until);

    for (const series of ['reservedBytes', 'allocatedBytes', 'cachedBytes']) {
      const points = timeline.map((t) => `${x(t.epochMillis).toFixed(1)},${y(t[series]).toFixed(1)}`);
      if (points.length === 1) points.push(`${width - right},${y(timeline[0][series]).toFixed(1)}`);
      chart.append(svg('polyline', { class: series.replace('Bytes', ''), points: points.join(' ') }));
    }
    const latest = timeline[timeline.length - 1];
    box.append(chart, el('div', { class: 'series-legend' },
      el('span', { class: 'reserved' }, `reserved ${bytes(latest.reservedBytes)}`),
      el('span', { class: 'allocated' }, `live (allocated) ${bytes(latest.allocatedBytes)}`),
      el('span', { class: 'cached' }, `cached ${bytes(latest.cachedBytes)}`)));
    return box;
  }

  // --- the tooltip -------------------------------------------------------------------------------------------------

  function showTooltip(block, event) {
    const tip = $('tooltip');
    const d = block.dataset;
    const size = Number(d.size);
    const lines = [
      el('div', null, el('span', { class: 'state' }, d.state), ` · ${bytes(size)} (${exact(size)})`),
      el('div', null, `${document.body.classList.contains('several') ? `${d.manager} · ` : ''}${d.location} segment ${d.segment}, `
        + `offset ${exact(Number(d.offset))}`),
    ];
    if (d.state === 'LIVE') {
      lines.push(el('div', null, `requested ${exact(Number(d.requested))}`));
      lines.push(d.site
        ? el('pre', null, d.site.split('\n').map((line) => line.trim()).filter(Boolean).slice(0, 8).join('\n'))
        : el('div', null, 'allocation site not recorded (compute.memory.leak-detection=paranoid records it)'));
    }
    tip.replaceChildren(...lines);
    tip.hidden = false;
    const margin = 14;
    const box = tip.getBoundingClientRect();
    const left = Math.min(event.clientX + margin, window.innerWidth - box.width - 4);
    const top = event.clientY + margin + box.height > window.innerHeight ? event.clientY - box.height - margin : event.clientY + margin;
    tip.style.left = `${Math.max(4, left)}px`;
    tip.style.top = `${Math.max(4, top)}px`;
  }

  function hover(point) {
    const target = document.elementFromPoint(point.clientX, point.clientY);
    const block = target ? target.closest('.block') : null;
    if (block) showTooltip(block, point);
    else $('tooltip').hidden = true;
  }

  document.addEventListener('mousemove', (event) => {
    state.mouse = { clientX: event.clientX, clientY: event.clientY };
    hover(state.mouse);
  });

  // --- controls ----------------------------------------------------------------------------------------------------

  $('refresh').addEventListener('change', (event) => {
    state.interval = Number(event.target.value);
    schedule();
  });
  $('trim').addEventListener('click', () => trim(false));
  $('release').addEventListener('click', () => trim(true));

  refresh();
}());
