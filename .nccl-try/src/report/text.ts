// text.ts: escaping and number formatting shared by the SVG and HTML reports.
export { bytes as bytesText, int } from '../cli/format.js';

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for XML/HTML content and attribute values. */
export const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => ENTITIES[c]!);
