// esbuild plugins for the Lambda bundles (serverless.yml: custom.esbuild.plugins).
// zod ships its error messages in some 40 languages; Easel answers in English, so every locale
// but English becomes an empty module: about 250 KB less to load on each cold start.
module.exports = [
  {
    name: 'stub-zod-locales',
    setup(build) {
      build.onResolve({ filter: /^\.\/[a-zA-Z-]+\.js$/ }, (args) =>
        args.importer.includes('/zod/v4/locales/') && args.path !== './en.js' ? { path: args.path, namespace: 'stub-zod-locale' } : undefined);
      build.onLoad({ filter: /.*/, namespace: 'stub-zod-locale' }, () => ({ contents: 'export default function () { return {}; }', loader: 'js' }));
    },
  },
];
