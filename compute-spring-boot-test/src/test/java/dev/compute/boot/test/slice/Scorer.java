package dev.compute.boot.test.slice;

import dev.compute.memory.DataType;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import org.springframework.stereotype.Service;

/** The application's service that uses compute memory: what a {@code @ComputeMemoryTest} tests. */
@Service
class Scorer {

    private final UnifiedMemoryManager memory;

    Scorer(UnifiedMemoryManager memory) {
        this.memory = memory;
    }

    double score(float[] weights, float[] features) {
        try (UnifiedBuffer w = memory.allocate(DataType.FLOAT32, weights.length);
             UnifiedBuffer f = memory.allocate(DataType.FLOAT32, features.length)) {
            w.copyFrom(weights);
            f.copyFrom(features);
            memory.ops().axpy(1.0, w, f);
            return memory.ops().sum(f);
        }
    }

    /** A bug of the kind the slice's extension finds: a buffer never closed. */
    UnifiedBuffer keep(int elements) {
        return memory.allocate(DataType.FLOAT32, elements);
    }
}
