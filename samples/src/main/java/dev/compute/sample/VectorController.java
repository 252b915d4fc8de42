package dev.compute.sample;

import java.util.List;
import org.jspecify.annotations.Nullable;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.DeleteMapping;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.PutMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;
import tools.jackson.databind.annotation.JsonDeserialize;

/**
 * The REST API. Math on posted arrays under {@code /api/math}; named vectors kept in compute memory under
 * {@code /api/vectors}. Numbers are FLOAT64; each array is read by {@link VectorValuesDeserializer}, which stops past the
 * longest vector the service takes.
 */
@RestController
public class VectorController {

    public record AxpyRequest(@Nullable Double alpha,
            @JsonDeserialize(using = VectorValuesDeserializer.class) double @Nullable [] x,
            @JsonDeserialize(using = VectorValuesDeserializer.class) double @Nullable [] y) {}

    public record ScaleRequest(@Nullable Double alpha, @JsonDeserialize(using = VectorValuesDeserializer.class) double @Nullable [] x) {}

    public record ClampRequest(@JsonDeserialize(using = VectorValuesDeserializer.class) double @Nullable [] x,
            @Nullable Double min, @Nullable Double max) {}

    public record SumRequest(@JsonDeserialize(using = VectorValuesDeserializer.class) double @Nullable [] x) {}

    public record VectorResult(double[] result) {}

    public record SumResult(double sum) {}

    public record PutVectorRequest(@JsonDeserialize(using = VectorValuesDeserializer.class) double @Nullable [] values) {}

    public record Vector(String name, long length, String location, double[] values) {}

    public record NamedScaleRequest(@Nullable Double alpha) {}

    /** {@code y = alpha * x + y} where {@code x} names another stored vector. */
    public record NamedAxpyRequest(@Nullable Double alpha, @Nullable String x) {}

    public record NamedSum(String name, double sum) {}

    private final VectorMath math;
    private final VectorStore store;

    public VectorController(VectorMath math, VectorStore store) {
        this.math = math;
        this.store = store;
    }

    @PostMapping("/api/math/axpy")
    @HeavyRequest
    public VectorResult axpy(@RequestBody AxpyRequest request) {
        return new VectorResult(math.axpy(required("alpha", request.alpha()), request.x(), request.y()));
    }

    @PostMapping("/api/math/scale")
    @HeavyRequest
    public VectorResult scale(@RequestBody ScaleRequest request) {
        return new VectorResult(math.scale(required("alpha", request.alpha()), request.x()));
    }

    /** Each element of {@code x} clamped to {@code [min, max]} by the service's own kernel ({@link ClampKernel}). */
    @PostMapping("/api/math/clamp")
    @HeavyRequest
    public VectorResult clamp(@RequestBody ClampRequest request) {
        return new VectorResult(math.clamp(request.x(), required("min", request.min()), required("max", request.max())));
    }

    @PostMapping("/api/math/sum")
    @HeavyRequest
    public SumResult sum(@RequestBody SumRequest request) {
        return new SumResult(math.sum(request.x()));
    }

    @GetMapping("/api/vectors")
    public List<VectorStore.VectorInfo> list() {
        return store.list();
    }

    @PutMapping("/api/vectors/{name}")
    @HeavyRequest
    public ResponseEntity<VectorStore.VectorInfo> put(@PathVariable String name, @RequestBody PutVectorRequest request) {
        VectorStore.Stored stored = store.put(name, request.values());
        return ResponseEntity.status(stored.created() ? HttpStatus.CREATED : HttpStatus.OK).body(stored.info());
    }

    @GetMapping("/api/vectors/{name}")
    @HeavyRequest
    public Vector get(@PathVariable String name) {
        VectorStore.StoredVector stored = store.get(name);
        return new Vector(name, stored.info().length(), stored.info().location(), stored.values());
    }

    @DeleteMapping("/api/vectors/{name}")
    public ResponseEntity<Void> delete(@PathVariable String name) {
        if (!store.delete(name)) {
            throw new VectorStore.VectorNotFoundException(name);
        }
        return ResponseEntity.noContent().build();
    }

    @PostMapping("/api/vectors/{name}/scale")
    public VectorStore.VectorInfo scaleStored(@PathVariable String name, @RequestBody NamedScaleRequest request) {
        return store.scale(name, required("alpha", request.alpha()));
    }

    @PostMapping("/api/vectors/{name}/axpy")
    public VectorStore.VectorInfo axpyStored(@PathVariable String name, @RequestBody NamedAxpyRequest request) {
        return store.axpy(required("alpha", request.alpha()), required("x", request.x()), name);
    }

    @GetMapping("/api/vectors/{name}/sum")
    public NamedSum sumStored(@PathVariable String name) {
        return new NamedSum(name, store.sum(name));
    }

    private static <T> T required(String field, @Nullable T value) {
        if (value == null) {
            throw new IllegalArgumentException("'" + field + "' is required");
        }
        return value;
    }
}
