import { z } from 'zod';

export const ProductSchema = z.object({
  id: z.number().int(),
  name: z.string(),
  price: z.number(),
  score: z.number(),
  active: z.boolean(),
});

/** The record of the GC, codec, restart and cache workloads: five fields, a ~30-character name. */
export type Product = z.infer<typeof ProductSchema>;

/** The i-th product: a fresh object each call, as a loader building records from rows would make. */
export function product(i: number): Product {
  return {
    id: i,
    name: 'Widget ' + String(i).padStart(8, '0') + ' premium edition',
    price: (i % 10000) / 100 + 0.99,
    score: (Math.imul(i, 2654435761) >>> 0) / 4294967296,
    active: i % 3 !== 0,
  };
}

export const PersonSchema = z.object({
  id: z.number().int(),
  firstName: z.string(),
  lastName: z.string(),
  email: z.string(),
  born: z.number(),
  salary: z.number(),
  active: z.boolean(),
});

/** The 7-field "Person" of the .NET pile's insert benchmark. */
export type Person = z.infer<typeof PersonSchema>;

const FIRST = ['Ada', 'Grace', 'Alan', 'Edsger', 'Barbara', 'Donald', 'Frances', 'Ken', 'Radia', 'Linus'];
const LAST = ['Lovelace', 'Hopper', 'Turing', 'Dijkstra', 'Liskov', 'Knuth', 'Allen', 'Thompson', 'Perlman', 'Torvalds'];

export function person(i: number): Person {
  const first = FIRST[i % 10]!;
  const last = LAST[Math.floor(i / 10) % 10]!;
  return {
    id: i,
    firstName: first,
    lastName: last,
    email: `${first.toLowerCase()}.${last.toLowerCase()}.${i}@example.com`,
    born: -631152000000 + (i % 20000) * 86400000,
    salary: 40000 + (i % 1000) * 97.5,
    active: i % 7 !== 0,
  };
}

/** The i-th 32-character ASCII string (the .NET pile's string[32] insert). */
export function string32(i: number): string {
  return ('s' + i.toString(36)).padEnd(32, '0123456789abcdefghijklmnopqrstuvwxyz');
}

/** The cache workload's string key of entry i. */
export function cacheKey(i: number): string {
  return 'product:' + i;
}
