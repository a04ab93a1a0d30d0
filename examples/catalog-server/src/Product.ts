import { z } from 'zod';

/** A product of the catalog, stored in a typed cache table (its codec is compiled once from this schema). */
export const ProductSchema = z.object({
  id: z.int32(),
  name: z.string(),
  price: z.number(),
  stock: z.int32(),
  category: z.string(),
});

export type Product = z.infer<typeof ProductSchema>;

const CATEGORIES = ['books', 'music', 'garden', 'kitchen', 'toys', 'tools', 'sports', 'office', 'pets', 'games', 'outdoor', 'health'];
const ADJECTIVES = ['Compact', 'Deluxe', 'Classic', 'Portable', 'Smart', 'Rugged', 'Silent', 'Bright', 'Modular', 'Vintage'];
const NOUNS = ['Lamp', 'Kettle', 'Backpack', 'Speaker', 'Notebook', 'Drill', 'Chair', 'Puzzle', 'Bottle', 'Tent', 'Clock', 'Brush'];

/** mulberry32: a small, fast PRNG; seeded by the id, so product `id` is the same on every machine and run. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The generated product number `id` (1-based): deterministic, so tests and benchmarks know what to expect. */
export function generateProduct(id: number): Product {
  const r = random(id * 2654435761);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(r() * list.length)]!;
  return {
    id,
    name: `${pick(ADJECTIVES)} ${pick(NOUNS)} ${id}`,
    price: Math.round(100 + r() * 99900) / 100,
    stock: Math.floor(r() * 1000),
    category: pick(CATEGORIES),
  };
}
