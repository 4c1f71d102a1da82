// Data parallelism: one network on every GPU, one all-reduce of the gradients per step.
// With fewer than 2 GPUs (or no NCCL) the group has one replica and trains as a plain arena.
import { cudaInfo, DataParallel, ncclInfo, planLayout, Trainer } from 'nn-arena';

const gpus = cudaInfo().devices;
const devices = gpus >= 2 && ncclInfo().available ? [0, 1] : [0];
const plan = planLayout({ layers: [64, 128, 10], batch: 32, samples: 1024, activations: ['relu', 'softmax'] });
const group = DataParallel.create(plan, { devices }); // batch 32 on each device
const trainer = new Trainer(group, { lr: 0.05 });
trainer.init(1);
const x = Float32Array.from({ length: 1024 * 64 }, (_, i) => Math.sin(i));
const labels = Uint8Array.from({ length: 1024 }, (_, i) => i % 10);
const r = await trainer.fit({ x, labels }, { epochs: 2 });
console.log(`${group.world} replica(s), global batch ${group.globalBatch}: loss ${r.loss.toFixed(3)}, ${r.steps} steps`);
group.dispose();
