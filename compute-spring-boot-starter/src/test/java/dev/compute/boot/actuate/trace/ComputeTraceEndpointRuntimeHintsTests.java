package dev.compute.boot.actuate.trace;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.springframework.aot.generate.ClassNameGenerator;
import org.springframework.aot.generate.DefaultGenerationContext;
import org.springframework.aot.generate.GenerationContext;
import org.springframework.aot.generate.InMemoryGeneratedFiles;
import org.springframework.aot.hint.predicate.RuntimeHintsPredicates;
import org.springframework.context.annotation.AnnotatedBeanDefinitionReader;
import org.springframework.context.aot.ApplicationContextAotGenerator;
import org.springframework.context.support.GenericApplicationContext;
import org.springframework.javapoet.ClassName;

/**
 * Ahead-of-time processing of an application with the endpoint registers its JSON bodies for binding, which the
 * operation's wildcard return type hides from Actuator's own hints: a native image can then write them.
 */
class ComputeTraceEndpointRuntimeHintsTests {

    @Test
    void theBodiesOfStartAndStopAreRegisteredForBinding() {
        GenericApplicationContext context = new GenericApplicationContext();
        new AnnotatedBeanDefinitionReader(context).register(ComputeTraceEndpoint.class);
        GenerationContext generation = new DefaultGenerationContext(new ClassNameGenerator(ClassName.get(getClass())),
                new InMemoryGeneratedFiles());

        new ApplicationContextAotGenerator().processAheadOfTime(context, generation);

        assertBoundForJson(generation, ComputeTraceEndpoint.Started.class, "maxEvents");
        assertBoundForJson(generation, ComputeTraceEndpoint.Stopped.class, "events");
        assertBoundForJson(generation, ComputeTraceEndpoint.Refused.class, "message");
    }

    private static void assertBoundForJson(GenerationContext generation, Class<?> body, String accessor) {
        assertThat(RuntimeHintsPredicates.reflection().onType(body)).as(body.getSimpleName()).accepts(generation.getRuntimeHints());
        assertThat(RuntimeHintsPredicates.reflection().onMethodInvocation(body, accessor)).as(body.getSimpleName() + "." + accessor)
                .accepts(generation.getRuntimeHints());
    }
}
