package dev.compute.memory;

import java.util.Objects;

/**
 * A kernel as a backend compiles it: OpenCL C source and the kernel's name, PTX and the function's name, or a Java
 * function for the CPU backend (and the simulated device). Give one to {@link Kernels#compile}, or several, one per
 * backend, and the manager takes the one its backend runs:
 *
 * <pre>{@code
 * ComputeKernel clamp = memory.kernels().compile(
 *         KernelSource.openCl(CLAMP_CL, "clamp_f64"),      // the opencl backend
 *         KernelSource.ptx(CLAMP_PTX, "clamp_f64"),        // the cuda backend
 *         KernelSource.java("clamp_f64", Clamp::run));      // the cpu backend and the simulated device
 * }</pre>
 *
 * <p>Equal sources (same language, text, name and build options; for Java the same {@link JavaKernel} object) are
 * one kernel: a manager compiles each once.
 */
public final class KernelSource {

    /** What a source is written in, and so which backends run it. */
    public enum Language {
        /** OpenCL C, built with {@code clBuildProgram} on the device: the {@code opencl} backend. */
        OPENCL_C,
        /**
         * PTX, loaded with {@code cuModuleLoadData} (the driver compiles it for the GPU): the {@code cuda} backend.
         * Ship kernels as PTX made with {@code nvcc -ptx}: the backend compiles no CUDA C++.
         */
        PTX,
        /** A {@link JavaKernel} run on the calling thread over the buffers' bytes: the {@code cpu} backend and the simulated device. */
        JAVA
    }

    private final Language language;
    private final String name;
    private final String text;
    private final String buildOptions;
    private final JavaKernel body;

    private KernelSource(Language language, String name, String text, String buildOptions, JavaKernel body) {
        this.language = language;
        this.name = name;
        this.text = text;
        this.buildOptions = buildOptions;
        this.body = body;
    }

    /** OpenCL C {@code programSource} and the {@code __kernel} in it to launch, built without options. */
    public static KernelSource openCl(String programSource, String kernelName) {
        return openCl(programSource, kernelName, "");
    }

    /**
     * OpenCL C {@code programSource} and the {@code __kernel} in it to launch, built with {@code buildOptions}
     * ({@code clBuildProgram}'s options: {@code "-D N=4 -cl-fast-relaxed-math"}).
     */
    public static KernelSource openCl(String programSource, String kernelName, String buildOptions) {
        return new KernelSource(Language.OPENCL_C, requireName(kernelName), requireText(programSource, "programSource"),
                Objects.requireNonNull(buildOptions, "buildOptions"), NO_BODY);
    }

    /** PTX text (as {@code nvcc -ptx} writes it) and the {@code .entry} function in it to launch. */
    public static KernelSource ptx(String ptx, String functionName) {
        return new KernelSource(Language.PTX, requireName(functionName), requireText(ptx, "ptx"), "", NO_BODY);
    }

    /**
     * A kernel in Java, named {@code name} in messages: {@code body} runs once per launch, on the launching thread,
     * over the buffers' bytes (see {@link JavaKernel}).
     */
    public static KernelSource java(String name, JavaKernel body) {
        return new KernelSource(Language.JAVA, requireName(name), "", "", Objects.requireNonNull(body, "body"));
    }

    public Language language() {
        return language;
    }

    /** The kernel's name: the OpenCL {@code __kernel}, the PTX {@code .entry}, or the Java kernel's name. */
    public String name() {
        return name;
    }

    /** The OpenCL C or PTX text; empty for a Java kernel. */
    public String text() {
        return text;
    }

    /** OpenCL build options; empty for other languages. */
    public String buildOptions() {
        return buildOptions;
    }

    /** The Java kernel; throws for a source in another language. */
    public JavaKernel javaBody() {
        if (language != Language.JAVA) {
            throw new IllegalStateException(this + " is no Java kernel");
        }
        return body;
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof KernelSource that && language == that.language && name.equals(that.name) && text.equals(that.text)
                && buildOptions.equals(that.buildOptions) && body == that.body;
    }

    @Override
    public int hashCode() {
        return Objects.hash(language, name, text, buildOptions, System.identityHashCode(body));
    }

    @Override
    public String toString() {
        return switch (language) {
            case OPENCL_C -> "OpenCL C kernel '" + name + "'" + (buildOptions.isEmpty() ? "" : " (options '" + buildOptions + "')");
            case PTX -> "PTX function '" + name + "'";
            case JAVA -> "Java kernel '" + name + "'";
        };
    }

    private static final JavaKernel NO_BODY = (shape, arguments) -> {
        throw new IllegalStateException("no Java body");
    };

    private static String requireName(String name) {
        Objects.requireNonNull(name, "name");
        if (name.isBlank()) {
            throw new IllegalArgumentException("a kernel needs a name");
        }
        return name;
    }

    private static String requireText(String text, String what) {
        Objects.requireNonNull(text, what);
        if (text.isBlank()) {
            throw new IllegalArgumentException(what + " is empty");
        }
        return text;
    }
}
