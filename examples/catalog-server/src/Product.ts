import { z } from 'zod';
// The repository's one seeded PRNG (mulberry32), shared with the tests and benchmarks; the example runs from the repository.
import { mulberry32 } from '../../../fixtures/prng';

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

/** The generated product number `id` (1-based): deterministic, so tests and benchmarks know what to expect. */
export function generateProduct(id: number): Product {
  // Seeded by the id: product `id` is the same on every machine and run.
  const r = mulberry32(id * 2654435761);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(r() * list.length)]!;
  return {
    id,
    name: `${pick(ADJECTIVES)} ${pick(NOUNS)} ${id}`,
    price: Math.round(100 + r() * 99900) / 100,
    stock: Math.floor(r() * 1000),
    category: pick(CATEGORIES),
  };
}
